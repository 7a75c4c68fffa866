//go:build e2e

package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const strandedNamespace = "kp-stranded"

// agentDaemonSet is the agent DaemonSet as this chart renders it with
// custom keys (autoscaler none). Its nodeSelector matches no node: doctor
// reads only its flags and its revisions.
const agentDaemonSet = `apiVersion: v1
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
          image: ghcr.io/kube-node-ready/kube-node-ready-agent:0.1.0
          args: [--autoscaler=none, --startup-taint=example.com/booting=true:NoSchedule, --unhealthy-taint=example.com/sick=true:NoSchedule]
`

// TestDoctorNamesStrandedTaints: after the agent's custom keys changed
// without the old ones in agent.previousTaintKeys, nodes the earlier
// revision of the DaemonSet re-tainted or registered with its keys (read
// from its ControllerRevision, as the DaemonSet controller keeps it) carry
// taints the running agent never removes: doctor names each key with its
// nodes, the revision and the helm fix, and exits 1; a preset's key, which
// every agent removes, is not named. Listing the old keys in
// --previous-taint-keys, as the fix says, settles it.
func TestDoctorNamesStrandedTaints(t *testing.T) {
	taint := func(keys ...string) harness.NodeOptions {
		o := harness.NodeOptions{NoStartupTaint: true}
		for _, key := range keys {
			o.ExtraTaints = append(o.ExtraTaints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
		}
		return o
	}
	cp.NewNode(t, "kp-stranded-retainted", taint("example.com/old-sick"))
	cp.NewNode(t, "kp-stranded-custom", taint("example.com/old-boot"))
	cp.NewNode(t, "kp-stranded-preset", taint(api.CAStartupTaintKey))
	cp.KubectlOK(t, agentDaemonSet, "apply", "-f", "-")
	t.Cleanup(func() {
		ctx := context.Background()
		// No namespace controller runs here: delete what it would.
		_, _ = cp.Kubectl(ctx, nil, "delete", "daemonset,controllerrevision", "--all", "-n", strandedNamespace, "--ignore-not-found")
		_, _ = cp.Kubectl(ctx, nil, "delete", "namespace", strandedNamespace, "--wait=false", "--ignore-not-found")
	})
	ds, err := cp.Client.AppsV1().DaemonSets(strandedNamespace).Get(t.Context(), "kube-node-ready", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	earlier := ds.Spec.Template.DeepCopy()
	earlier.Spec.Containers[0].Args = []string{"--autoscaler=none", "--startup-taint=example.com/old-boot=true:NoSchedule", "--unhealthy-taint=example.com/old-sick=true:NoSchedule"}
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

	runDoctor := func(t *testing.T) (result, doctor.Report) {
		t.Helper()
		r := kubectl(t, "", nil, "node-ready", "doctor", "-n", strandedNamespace)
		j := kubectl(t, "", nil, "node-ready", "doctor", "-n", strandedNamespace, "-o", "json")
		var rep doctor.Report
		if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil {
			t.Fatalf("doctor -o json: %v\n%s", err, j)
		}
		return r, rep
	}
	// nodesOf are the nodes of this test doctor names for key (other tests'
	// nodes may carry our keys too).
	nodesOf := func(rep doctor.Report, key string) []string {
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

	strandedOf := func(rep doctor.Report, key string) doctor.StrandedTaint {
		for _, s := range rep.StrandedTaints {
			if s.Key == key {
				return s
			}
		}
		return doctor.StrandedTaint{}
	}

	r, rep := runDoctor(t)
	if r.code != kubectlplugin.ExitError {
		t.Fatalf("doctor after the key change: %s; want exit 1", r)
	}
	for key, want := range map[string]string{"example.com/old-sick": "kp-stranded-retainted", "example.com/old-boot": "kp-stranded-custom", api.CAStartupTaintKey: ""} {
		if got := strings.Join(nodesOf(rep, key), ","); got != want {
			t.Errorf("doctor names %q for %s, want %q\n%s", got, key, want, r.stdout)
		}
	}
	if s := strandedOf(rep, "example.com/old-boot"); s.From != "revision 1 of DaemonSet kp-stranded/kube-node-ready" || len(s.Fixes) != 1 ||
		!strings.HasSuffix(s.Fixes[0], "helm upgrade kp-stranded oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version 0.1.0 --namespace kp-stranded --reset-then-reuse-values --set 'agent.previousTaintKeys={example.com/old-boot,example.com/old-sick}'") {
		t.Errorf("doctor does not name the revision and the helm fix: %+v", s)
	}
	// The fix's value, given to the agent as the chart would.
	ds.Spec.Template.Spec.Containers[0].Args = append(ds.Spec.Template.Spec.Containers[0].Args, "--previous-taint-keys=example.com/old-boot,example.com/old-sick")
	if _, err := cp.Client.AppsV1().DaemonSets(strandedNamespace).Update(t.Context(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, rep = runDoctor(t)
	for _, key := range []string{"example.com/old-boot", "example.com/old-sick"} {
		if got := nodesOf(rep, key); len(got) != 0 {
			t.Errorf("with --previous-taint-keys doctor still names %v for %s", got, key)
		}
	}
}
