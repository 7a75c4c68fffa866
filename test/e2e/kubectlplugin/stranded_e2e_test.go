//go:build e2e

package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const strandedNamespace = "kp-stranded"

// rolledBackAgent is the agent DaemonSet as a release before the taint-key
// presets rendered it (the seed keys under the old flag names, no
// --autoscaler), as `helm rollback` to it leaves it. Its nodeSelector
// matches no node: doctor reads only its flags.
const rolledBackAgent = `apiVersion: v1
kind: Namespace
metadata: {name: kp-stranded}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kube-node-ready
  namespace: kp-stranded
  labels: {app.kubernetes.io/name: kube-node-ready, app.kubernetes.io/instance: kp-stranded, app.kubernetes.io/managed-by: Helm, helm.sh/chart: kube-node-ready-0.1.0}
spec:
  selector: {matchLabels: {app: kube-node-ready}}
  template:
    metadata: {labels: {app: kube-node-ready}}
    spec:
      nodeSelector: {kp-stranded/never: "true"}
      containers:
        - name: agent
          image: ghcr.io/kube-node-ready/kube-node-ready-agent:previous
          args: [--startup-taint=node-ready/unverified=true:NoSchedule, --retaint-taint=node-ready/unhealthy=true:NoSchedule]
`

// TestDoctorNamesStrandedTaints: after a rollback to a release before the
// presets, nodes the newer release re-tainted (the Cluster Autoscaler
// status key) or registered with its startup key carry taints the running
// agent never removes: doctor names each key with its nodes and exits 1,
// and the swap it prints, run with the real kubectl as printed, hands the
// node to the running agent's own taint. Rolled forward (the DaemonSet of
// this chart), nothing is stranded. A custom key an earlier revision of the
// DaemonSet wrote (its ControllerRevision) is named too, and listing it in
// --previous-taint-keys, as the fix says, settles it.
func TestDoctorNamesStrandedTaints(t *testing.T) {
	taint := func(keys ...string) harness.NodeOptions {
		o := harness.NodeOptions{NoStartupTaint: true}
		for _, key := range keys {
			o.ExtraTaints = append(o.ExtraTaints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		return o
	}
	cp.NewNode(t, "kp-stranded-retainted", taint(api.CAStatusTaintKey))
	cp.NewNode(t, "kp-stranded-joined", taint(api.CAStartupTaintKey))
	cp.NewNode(t, "kp-stranded-seed", taint(api.StartupTaintKey))
	cp.NewNode(t, "kp-stranded-custom", taint("example.com/old-boot"))
	cp.KubectlOK(t, rolledBackAgent, "apply", "-f", "-")
	t.Cleanup(func() {
		ctx := context.Background()
		// No namespace controller runs here: delete what it would.
		_, _ = cp.Kubectl(ctx, nil, "delete", "daemonset,controllerrevision", "--all", "-n", strandedNamespace, "--ignore-not-found")
		_, _ = cp.Kubectl(ctx, nil, "delete", "namespace", strandedNamespace, "--wait=false", "--ignore-not-found")
	})

	doctor := func(t *testing.T) (result, kubectlplugin.DoctorReport) {
		t.Helper()
		r := kubectl(t, "", nil, "node-ready", "doctor", "-n", strandedNamespace)
		j := kubectl(t, "", nil, "node-ready", "doctor", "-n", strandedNamespace, "-o", "json")
		var rep kubectlplugin.DoctorReport
		if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
			t.Fatalf("doctor -o json: %v\n%s", err, j)
		}
		return r, rep
	}
	// nodesOf are the nodes of this test doctor names for key (other tests'
	// nodes may carry our keys too).
	nodesOf := func(rep kubectlplugin.DoctorReport, key string) []string {
		var out []string
		for _, s := range rep.StrandedTaints {
			if s.Key != key {
				continue
			}
			for _, n := range s.Nodes {
				if strings.HasPrefix(n, "kp-stranded-") {
					out = append(out, n)
				}
			}
		}
		return out
	}

	strandedOf := func(rep kubectlplugin.DoctorReport, key string) kubectlplugin.StrandedTaint {
		for _, s := range rep.StrandedTaints {
			if s.Key == key {
				return s
			}
		}
		return kubectlplugin.StrandedTaint{}
	}

	r, rep := doctor(t)
	if r.code != kubectlplugin.ExitError {
		t.Fatalf("doctor after the rollback: %s; want exit 1", r)
	}
	for key, want := range map[string]string{api.CAStatusTaintKey: "kp-stranded-retainted", api.CAStartupTaintKey: "kp-stranded-joined", api.StartupTaintKey: ""} {
		if got := strings.Join(nodesOf(rep, key), ","); got != want {
			t.Errorf("doctor after the rollback names %q for %s, want %q\n%s", got, key, want, r.stdout)
		}
	}
	if s := strandedOf(rep, api.CAStatusTaintKey); !strings.Contains(s.Detail, "DaemonSet kp-stranded/kube-node-ready runs a release before the taint-key presets") {
		t.Errorf("doctor does not say the running agent predates the presets: %+v", s)
	}
	// The printed swap, run as printed.
	swap := regexp.MustCompile(`kubectl taint node kp-stranded-retainted [^\n]*`).FindString(r.stdout)
	if swap == "" {
		t.Fatalf("no kubectl taint fix for kp-stranded-retainted:\n%s", r.stdout)
	}
	cp.KubectlOK(t, "", strings.Fields(strings.TrimPrefix(swap, "kubectl "))...)
	n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), "kp-stranded-retainted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hasTaint(n, api.CAStatusTaintKey) || !hasTaint(n, api.UnhealthyTaintKey) {
		t.Errorf("after %q the node carries %v; want %s instead of %s", swap, n.Spec.Taints, api.UnhealthyTaintKey, api.CAStatusTaintKey)
	}
	if _, rep = doctor(t); len(nodesOf(rep, api.CAStatusTaintKey)) != 0 {
		t.Errorf("after the swap doctor still names %v for %s", nodesOf(rep, api.CAStatusTaintKey), api.CAStatusTaintKey)
	}

	// Rolled forward: this chart's agent (--autoscaler) removes every
	// preset's key, and a custom one an earlier revision wrote is named.
	ds, err := cp.Client.AppsV1().DaemonSets(strandedNamespace).Get(t.Context(), "kube-node-ready", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	earlier := ds.Spec.Template.DeepCopy()
	earlier.Spec.Containers[0].Args = []string{"--autoscaler=none", "--startup-taint=example.com/old-boot=true:NoSchedule"}
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"$patch": "replace", "metadata": earlier.ObjectMeta, "spec": earlier.Spec}}})
	if err != nil {
		t.Fatal(err)
	}
	// No controller-manager runs here: the revision the DaemonSet
	// controller would have kept is written as it writes one.
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "kube-node-ready-old", Namespace: strandedNamespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1}
	if _, err := cp.Client.AppsV1().ControllerRevisions(strandedNamespace).Create(t.Context(), rev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Args = []string{"--autoscaler=cluster-autoscaler", "--startup-taint=" + api.Default().StartupTaint(), "--unhealthy-taint=" + api.Default().UnhealthyTaint()}
	if ds, err = cp.Client.AppsV1().DaemonSets(strandedNamespace).Update(t.Context(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, rep = doctor(t)
	for key, want := range map[string]string{api.CAStatusTaintKey: "", api.CAStartupTaintKey: "", "example.com/old-boot": "kp-stranded-custom"} {
		if got := strings.Join(nodesOf(rep, key), ","); got != want {
			t.Errorf("doctor rolled forward names %q for %s, want %q\n%s", got, key, want, r.stdout)
		}
	}
	if s := strandedOf(rep, "example.com/old-boot"); s.From != "revision 1 of DaemonSet kp-stranded/kube-node-ready" || len(s.Fixes) != 1 ||
		!strings.HasSuffix(s.Fixes[0], "helm upgrade kp-stranded oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version 0.1.0 --namespace kp-stranded --reset-then-reuse-values --set 'agent.previousTaintKeys={example.com/old-boot}'") {
		t.Errorf("doctor rolled forward does not name the revision and the helm fix: %+v", s)
	}
	// The fix's value, given to the agent as the chart would.
	ds.Spec.Template.Spec.Containers[0].Args = append(ds.Spec.Template.Spec.Containers[0].Args, "--previous-taint-keys=example.com/old-boot")
	if _, err := cp.Client.AppsV1().DaemonSets(strandedNamespace).Update(t.Context(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, rep = doctor(t); len(nodesOf(rep, "example.com/old-boot")) != 0 {
		t.Errorf("with --previous-taint-keys=example.com/old-boot doctor still names %v", nodesOf(rep, "example.com/old-boot"))
	}
}
