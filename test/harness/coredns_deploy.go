package harness

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// coreDNSManifest is CoreDNS as a cluster runs it: a Deployment in
// kube-system behind the kube-dns Service, with the kubernetes plugin, and the
// harness's ExternalName answered locally because nothing may leave the
// machine. It tolerates the startup taint, as the cluster DNS must run before
// any node is verified.
const coreDNSManifest = `apiVersion: v1
kind: ServiceAccount
metadata: {name: coredns, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "system:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "system:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:coredns"}
subjects: [{kind: ServiceAccount, name: coredns, namespace: kube-system}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: coredns, namespace: kube-system}
data:
  Corefile: |
    .:53 {
        errors
        health :8080
        ready :8181
        hosts {
%[1]s            fallthrough
        }
        kubernetes cluster.local in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
        }
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  replicas: %[2]d
  selector: {matchLabels: {k8s-app: kube-dns}}
  template:
    metadata: {labels: {k8s-app: kube-dns}}
    spec:
      serviceAccountName: coredns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations: [{key: CriticalAddonsOnly, operator: Exists}, STARTUP_TOLERATIONS]
      securityContext:
        runAsNonRoot: true
        sysctls: [{name: net.ipv4.ip_unprivileged_port_start, value: "0"}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {k8s-app: kube-dns}}}
      containers:
      - name: coredns
        image: %[3]s
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /health, port: 8080}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
        volumeMounts: [{name: config, mountPath: /etc/coredns, readOnly: true}]
      volumes: [{name: config, configMap: {name: coredns}}]
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  clusterIP: %[7]s
  clusterIPs: [%[4]s]
  ipFamilies: [%[5]s]
  ipFamilyPolicy: %[6]s
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
`

// deployCoreDNS applies the CoreDNS Deployment and waits until a CoreDNS pod
// answers for the kubernetes Service.
func (c *Cluster) deployCoreDNS(ctx context.Context) error {
	ref, err := ImageRef(filepath.Join(c.BinDir, "images", coreDNSTar))
	if err != nil {
		return err
	}
	policy := corev1.IPFamilyPolicySingleStack
	if len(c.Families) > 1 {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	manifest := fmt.Sprintf(coreDNSManifest, externalHosts(c.Families, 12), c.opts.CoreDNSReplicas, ref,
		joinField(c.Families, func(a Addresses) string { return a.DNSServiceIP }),
		joinField(c.Families, func(a Addresses) string { return string(a.Family) }), policy, c.Primary().DNSServiceIP)
	manifest = strings.ReplaceAll(manifest, "STARTUP_TOLERATIONS", startupTolerations())
	if _, err := c.Kubectl(ctx, bytes.NewBufferString(manifest), "apply", "-f", "-"); err != nil {
		return err
	}
	return c.WaitCoreDNS(ctx, int(c.opts.CoreDNSReplicas))
}

// WaitCoreDNS waits until want CoreDNS pods are ready and the first answers
// for kubernetes.default, and records its address as DNSAddr.
func (c *Cluster) WaitCoreDNS(ctx context.Context, want int) error {
	svc, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		return err
	}
	client := &dns.Client{Timeout: 500 * time.Millisecond}
	last := "no ready pod"
	err = waitFor(ctx, c.apiserver, 120*time.Second, func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return false, nil
		}
		var ready []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && PodReady(&p) && p.Status.PodIP != "" {
				ready = append(ready, p.Status.PodIP)
			}
		}
		if len(ready) < want {
			last = fmt.Sprintf("%d of %d CoreDNS pods ready", len(ready), want)
			return false, nil
		}
		if want == 0 {
			return true, nil
		}
		addr := net.JoinHostPort(ready[0], "53")
		ips, err := Lookup(client, addr, "kubernetes.default.svc.cluster.local.", c.Primary().Family)
		if err != nil || len(ips) != 1 || ips[0] != svc.Spec.ClusterIP {
			last = fmt.Sprintf("CoreDNS at %s: %v %v", addr, ips, err)
			return false, nil
		}
		c.DNSAddr = addr
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CoreDNS: %w (%s)", err, last)
	}
	return nil
}

// kubeletAPIBinding lets the API server's kubelet client (logs, exec) use
// the kubelet API, as kubeadm sets up.
func kubeletAPIBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "kube-apiserver-kubelet-client"}},
	}
}
