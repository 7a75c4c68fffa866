package harness

import (
	"context"
	_ "embed"
	"fmt"
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
		p, err := LaterTool(context.Background(), bin, filepath.Join("images", "cert-manager-"+c+".tar"))
		if err != nil {
			return nil, fmt.Errorf("cert-manager image: %w", err)
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
// cert-manager's own chart does, with RBAC cut to what the compiled-in
// controllers use; the file says what is left out and why.
//
//go:embed manifests/cert-manager.yaml
var certManagerManifest string
