//go:build e2e

package kubectlplugin_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestSuspendSwitchIsTheOperators: against the real API server with the
// chart's RBAC, `kubectl node-ready suspend` (run as an operator) writes the
// switch with its reason, status shows it, the agents' and the webhook's
// ServiceAccounts may read it and may not create, change or delete it, and
// `resume` removes it.
func TestSuspendSwitchIsTheOperators(t *testing.T) {
	ns := harness.AgentNamespace
	cms := cp.Client.CoreV1().ConfigMaps(ns)

	plugin(t, "suspend", "--reason", "DNS incident 42", "--namespace", ns)
	cm, err := cms.Get(t.Context(), api.SuspendConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the switch after suspend: %v", err)
	}
	if got := cm.Data[api.SuspendReasonKey]; got != "DNS incident 42" {
		t.Errorf("reason %q, want the one given", got)
	}
	if out := plugin(t, "status", "--namespace", ns).stdout; !strings.Contains(out, "SUSPENDED") || !strings.Contains(out, "DNS incident 42") {
		t.Errorf("status does not show the switch and its reason:\n%s", out)
	}

	for _, sa := range []string{harness.AgentServiceAccount, harness.WebhookServiceAccount} {
		path, err := cp.ServiceAccountKubeconfig(t.Context(), ns, sa)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatal(err)
		}
		c := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps(ns)
		got, err := c.Get(t.Context(), api.SuspendConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s cannot read the switch: %v", sa, err)
			continue
		}
		got.Data[api.SuspendReasonKey] = "changed by " + sa
		if _, err := c.Update(t.Context(), got, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s updating the switch: %v, want Forbidden", sa, err)
		}
		if err := c.Delete(t.Context(), api.SuspendConfigMap, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s deleting the switch: %v, want Forbidden", sa, err)
		}
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "not-the-switch", Namespace: ns}}
		if _, err := c.Create(t.Context(), other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s creating a ConfigMap: %v, want Forbidden", sa, err)
		}
	}

	plugin(t, "resume", "--namespace", ns)
	if _, err := cms.Get(t.Context(), api.SuspendConfigMap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the switch after resume: %v, want it gone", err)
	}
}
