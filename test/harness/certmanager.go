package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// cert-manager on real nodes: its controller and CA injector, built by
// `make tools` (test/tools/build.sh) from cert-manager's
// pinned module into bin/images/cert-manager-{controller,cainjector}.tar,
// run as Deployments with leader election, under RBAC written for the
// controllers that build compiles in.
const (
	// CertManagerNamespace is the namespace DeployCertManager runs cert-manager in.
	CertManagerNamespace = "cert-manager"
	// certManagerLeaseNamespace holds both components' leader election
	// Leases, cert-manager's default.
	certManagerLeaseNamespace = "kube-system"
	// CertManagerControllerLease and CertManagerCAInjectorLease are the
	// Leases the controller and the CA injector hold while they lead.
	CertManagerControllerLease = "cert-manager-controller"
	CertManagerCAInjectorLease = "cert-manager-cainjector-leader-election"
)

// CertManagerImages are the image tarballs of cert-manager's controller and
// CA injector, for ClusterOptions.Images; an error names the command that
// builds them.
func CertManagerImages() ([]string, error) {
	bin, err := resolveBinDir("")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range []string{"controller", "cainjector"} {
		p := filepath.Join(bin, "images", "cert-manager-"+c+".tar")
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("cert-manager image %s missing: run `make tools`: %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// DeployCertManager installs cert-manager's CRDs and runs its controller and
// CA injector in CertManagerNamespace, from the images CertManagerImages
// names (imported into the nodes, never pulled), and waits until each is
// Ready and holds its Lease. Both tolerate the startup taint: the webhook
// they serve must run while nodes are still unverified.
func (c *Cluster) DeployCertManager(ctx context.Context) error {
	start := time.Now()
	if err := c.InstallCRDs(ctx, "cert-manager"); err != nil {
		return err
	}
	refs := map[string]string{}
	for _, comp := range []string{"controller", "cainjector"} {
		ref, err := ImageRef(filepath.Join(c.BinDir, "images", "cert-manager-"+comp+".tar"))
		if err != nil {
			return fmt.Errorf("%w (run `make tools`)", err)
		}
		refs[comp] = ref
	}
	manifest := strings.NewReplacer("CONTROLLER_IMAGE", refs["controller"], "CAINJECTOR_IMAGE", refs["cainjector"],
		"CM_NAMESPACE", CertManagerNamespace, "LEASE_NAMESPACE", certManagerLeaseNamespace,
		"STARTUP_TOLERATIONS", startupTolerations()).Replace(certManagerManifest)
	if _, err := c.Kubectl(ctx, strings.NewReader(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	for _, d := range []string{"cert-manager", "cert-manager-cainjector"} {
		if _, err := c.Kubectl(ctx, nil, "rollout", "status", "-n", CertManagerNamespace, "deployment/"+d, "--timeout=3m"); err != nil {
			return fmt.Errorf("cert-manager: %w\n%s", err, c.certManagerState(ctx))
		}
	}
	for _, lease := range []string{CertManagerControllerLease, CertManagerCAInjectorLease} {
		var holder string
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Client.CoordinationV1().Leases(certManagerLeaseNamespace).Get(ctx, lease, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			if l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			return holder != "", nil
		})
		if err != nil {
			return fmt.Errorf("cert-manager: no holder of the Lease %s/%s: %w\n%s", certManagerLeaseNamespace, lease, err, c.certManagerState(ctx))
		}
		c.logf("cert-manager: %s leads (Lease %s)", holder, lease)
	}
	c.logf("cert-manager controller and cainjector running in %s", time.Since(start).Round(time.Millisecond))
	return nil
}

// certManagerState is what to look at when cert-manager does not come up:
// its pods and their last log lines.
func (c *Cluster) certManagerState(ctx context.Context) string {
	pods, _ := c.Kubectl(ctx, nil, "get", "pods", "-n", CertManagerNamespace, "-o", "wide")
	logs, _ := c.Kubectl(ctx, nil, "logs", "-n", CertManagerNamespace, "-l", "app.kubernetes.io/instance=cert-manager", "--tail=30", "--prefix", "--all-containers")
	return pods + "\n" + logs
}

// certManagerManifest runs cert-manager's controller and CA injector the way
// cert-manager's own chart does (Deployments, one ServiceAccount each,
// leader election in kube-system, non-root, read-only root file system, no
// capabilities, /livez probe), with RBAC cut to what the compiled-in
// controllers use. Left out of cert-manager's chart rules, and why:
//   - ACME orders and challenges, HTTP-01 pods, services, ingresses and
//     routes, the ingress and Gateway shims, CertificateSigningRequests and
//     SubjectAccessReviews: those controllers are not in the test build;
//   - create, update and delete of Secrets for Issuers and ClusterIssuers:
//     only ACME issuers write their account key; SelfSigned and CA read;
//   - the */finalizers updates: only an API server enforcing owner
//     references (OwnerReferencesPermissionEnforcement) asks for them;
//   - signers "approve": only cert-manager's own webhook checks it, and it
//     does not run here;
//   - the CA injector's APIServices, CustomResourceDefinitions and
//     ValidatingWebhookConfigurations: it is started with only the
//     MutatingWebhookConfiguration injector, all kube-node-ready has.
//
// Names and labels follow cert-manager's chart installed as release
// cert-manager.
const certManagerManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: CM_NAMESPACE
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cert-manager
  namespace: CM_NAMESPACE
  labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: controller}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: cert-manager-cainjector
  namespace: CM_NAMESPACE
  labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: cainjector}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-controller-issuers
rules:
  - apiGroups: [cert-manager.io]
    resources: [issuers, issuers/status]
    verbs: [update, patch]
  - apiGroups: [cert-manager.io]
    resources: [issuers]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-controller-clusterissuers
rules:
  - apiGroups: [cert-manager.io]
    resources: [clusterissuers, clusterissuers/status]
    verbs: [update, patch]
  - apiGroups: [cert-manager.io]
    resources: [clusterissuers]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
---
# The certificates controllers (trigger, key manager, request manager,
# issuing, readiness, revision manager, metrics) and the CertificateRequest
# approver and SelfSigned and CA signers.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-controller-certificates
rules:
  - apiGroups: [cert-manager.io]
    resources: [certificates, certificates/status, certificaterequests, certificaterequests/status]
    verbs: [update, patch]
  - apiGroups: [cert-manager.io]
    resources: [certificates, certificaterequests, clusterissuers, issuers]
    verbs: [get, list, watch]
  # The request manager creates CertificateRequests and replaces stale
  # ones; the revision manager deletes old revisions. (cert-manager's chart
  # grants this in its ingress-shim role.)
  - apiGroups: [cert-manager.io]
    resources: [certificaterequests]
    verbs: [create, delete]
  # The key manager keeps the next private key in a temporary Secret; the
  # issuing controller writes the certificate's Secret.
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch, create, update, delete, patch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cert-manager:leaderelection
  namespace: LEASE_NAMESPACE
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [cert-manager-controller]
    verbs: [get, update, patch]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: cert-manager-cainjector
rules:
  - apiGroups: [cert-manager.io]
    resources: [certificates]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [secrets]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [events.k8s.io]
    resources: [events]
    verbs: [create, patch]
  - apiGroups: [admissionregistration.k8s.io]
    resources: [mutatingwebhookconfigurations]
    verbs: [get, list, watch, update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cert-manager-cainjector:leaderelection
  namespace: LEASE_NAMESPACE
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    resourceNames: [cert-manager-cainjector-leader-election]
    verbs: [get, update, patch]
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-controller-issuers
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cert-manager-controller-issuers}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: CM_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-controller-clusterissuers
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cert-manager-controller-clusterissuers}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: CM_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-controller-certificates
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cert-manager-controller-certificates}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: CM_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cert-manager:leaderelection
  namespace: LEASE_NAMESPACE
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cert-manager:leaderelection}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: CM_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: cert-manager-cainjector
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cert-manager-cainjector}
subjects: [{kind: ServiceAccount, name: cert-manager-cainjector, namespace: CM_NAMESPACE}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cert-manager-cainjector:leaderelection
  namespace: LEASE_NAMESPACE
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cert-manager-cainjector:leaderelection}
subjects: [{kind: ServiceAccount, name: cert-manager-cainjector, namespace: CM_NAMESPACE}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cert-manager
  namespace: CM_NAMESPACE
  labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: controller}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: controller}
  template:
    metadata:
      labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: controller}
    spec:
      serviceAccountName: cert-manager
      enableServiceLinks: false
      tolerations: [STARTUP_TOLERATIONS]
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: cert-manager-controller
          image: CONTROLLER_IMAGE
          imagePullPolicy: Never
          args:
            - --v=2
            - --cluster-resource-namespace=$(POD_NAMESPACE)
            - --leader-election-namespace=LEASE_NAMESPACE
          env:
            - name: POD_NAMESPACE
              valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
          ports:
            - {name: http-metrics, containerPort: 9402, protocol: TCP}
            - {name: http-healthz, containerPort: 9403, protocol: TCP}
          livenessProbe:
            httpGet: {path: /livez, port: http-healthz}
            initialDelaySeconds: 10
            periodSeconds: 10
            timeoutSeconds: 15
            failureThreshold: 8
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
          resources:
            requests: {cpu: 10m, memory: 32Mi}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: cert-manager-cainjector
  namespace: CM_NAMESPACE
  labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: cainjector}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: cainjector}
  template:
    metadata:
      labels: {app.kubernetes.io/instance: cert-manager, app.kubernetes.io/component: cainjector}
    spec:
      serviceAccountName: cert-manager-cainjector
      enableServiceLinks: false
      tolerations: [STARTUP_TOLERATIONS]
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: cert-manager-cainjector
          image: CAINJECTOR_IMAGE
          imagePullPolicy: Never
          args:
            - --v=2
            - --leader-election-namespace=LEASE_NAMESPACE
            - --enable-validatingwebhookconfigurations-injectable=false
            - --enable-apiservices-injectable=false
            - --enable-customresourcedefinitions-injectable=false
          ports:
            - {name: http-metrics, containerPort: 9402, protocol: TCP}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
          resources:
            requests: {cpu: 10m, memory: 32Mi}
`
