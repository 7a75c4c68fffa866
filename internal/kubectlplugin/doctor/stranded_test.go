package doctor

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/golden"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// tainted is a node carrying the taints of keys, as the agent writes them.
func tainted(name string, keys ...string) corev1.Node {
	var taints []corev1.Taint
	for _, key := range keys {
		taints = append(taints, corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	}
	return node(name, taints)
}

// presetDS is the agent DaemonSet of this chart: --autoscaler always, and
// the taints and previous keys given.
func presetDS(preset, startup string, previous ...string) appsv1.DaemonSet {
	ds := workloadtest.AgentDaemonSet(startup, "")
	args := []string{"--autoscaler=" + preset, "--startup-taint=" + startup}
	if len(previous) > 0 {
		args = append(args, "--previous-taint-keys="+strings.Join(previous, ","))
	}
	ds.Spec.Template.Spec.Containers[0].Args = args
	ds.UID = "ds-uid"
	return ds
}

// revision is a ControllerRevision of ds holding its pod template with
// the agent's args.
func revision(t *testing.T, ds appsv1.DaemonSet, number int64, args ...string) appsv1.ControllerRevision {
	t.Helper()
	tmpl := ds.Spec.Template.DeepCopy()
	tmpl.Spec.Containers[0].Args = args
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{
		"$patch": "replace", "metadata": tmpl.ObjectMeta, "spec": tmpl.Spec}}})
	if err != nil {
		t.Fatal(err)
	}
	return appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ds.Namespace, Name: ds.Name + "-" + string(rune('a'+number)),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: number,
	}
}

// strandedFake is a cluster after the agent's custom keys changed without
// the old ones in agent.previousTaintKeys: the earlier revision re-tainted
// one node with its unhealthy key, two nodes registered with its startup
// key, one with a preset's key (which the running agent removes), one is
// being deleted, one carries another's taint.
func strandedFake(t *testing.T) *fakeAPI {
	f := newFake(
		tainted("ip-10-0-1-1", "example.com/old-sick"),
		tainted("ip-10-0-1-2", "example.com/old-boot"),
		tainted("ip-10-0-1-3", "example.com/old-boot", "example.com/gpu"),
		tainted("ip-10-0-1-4", api.CAStartupTaintKey),
		node("ip-10-0-1-5", []corev1.Taint{{Key: "example.com/old-boot", Effect: corev1.TaintEffectNoSchedule}}, deleting),
		tainted("ip-10-0-1-6", "example.com/gpu"),
	)
	ds := presetDS(api.PresetNone, "example.com/booting=true:NoSchedule")
	upgradedFrom(t, f, ds)
	return f
}

// upgradedFrom gives f the agent's DaemonSet ds, the webhook, and ds's two
// revisions: the first with custom startup and unhealthy keys
// (example.com/old-boot, example.com/old-sick), the second ds's own.
func upgradedFrom(t *testing.T, f *fakeAPI, ds appsv1.DaemonSet) {
	t.Helper()
	f.daemonSets = []appsv1.DaemonSet{ds}
	f.deployments = []appsv1.Deployment{workloadtest.WebhookDeployment()}
	f.revisions = []appsv1.ControllerRevision{
		revision(t, ds, 1, "--autoscaler=none", "--startup-taint=example.com/old-boot=true:NoSchedule", "--unhealthy-taint=example.com/old-sick=true:NoSchedule"),
		revision(t, ds, 2, ds.Spec.Template.Spec.Containers[0].Args...),
	}
}

// TestGoldenDoctorStranded: doctor names each taint key of ours on nodes
// that no running agent removes, with the nodes and the fix: after a
// custom key change, the helm upgrade listing the old key (and every other
// stranded one) in agent.previousTaintKeys; with no agent, the kubectl
// taint that removes it.
func TestGoldenDoctorStranded(t *testing.T) {
	for _, tt := range []struct {
		file string
		fake func(t *testing.T) *fakeAPI
		args []string
	}{
		{"doctor-stranded-changed.json", strandedFake, []string{"-o", "json"}},
		{"doctor-stranded-custom.txt", func(t *testing.T) *fakeAPI {
			ds := presetDS(api.PresetNone, "example.com/booting=true:NoSchedule", "example.com/older-boot")
			f := newFake(tainted("ip-10-0-2-1", "example.com/old-boot"), tainted("ip-10-0-2-2", "example.com/old-boot", "example.com/old-sick"),
				tainted("ip-10-0-2-3", "example.com/booting"), tainted("ip-10-0-2-4", "example.com/older-boot"))
			upgradedFrom(t, f, ds)
			return f
		}, nil},
		{"doctor-stranded-no-agent.txt", func(*testing.T) *fakeAPI {
			f := newFake(tainted("ip-10-0-3-1", api.CAStartupTaintKey), tainted("ip-10-0-3-2", api.CAStartupTaintKey), tainted("ip-10-0-3-3", api.UnhealthyTaintKey))
			for name, n := range f.nodes {
				n.UID = types.UID("uid-" + name) // printed in the fixes
			}
			return f
		}, nil},
	} {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut, _ := run(tt.fake(t), "", append([]string{"doctor"}, tt.args...)...)
			if code != ExitError || !strings.Contains(errOut, "found: see the fixes above") {
				t.Errorf("exit %d, want %d; stderr %q", code, ExitError, errOut)
			}
			golden.Compare(t, tt.file, []byte(out))
		})
	}
}

// TestDoctorStrandedOwnership: what each agent removes decides what is
// stranded: an agent removes every preset's key, its own and its previous
// keys; a node being deleted and another's taint are never named.
func TestDoctorStrandedOwnership(t *testing.T) {
	keysOf := func(f *fakeAPI) map[string][]string {
		r := read(t.Context(), f, "", "")
		out := map[string][]string{}
		for _, s := range diagnoseAll(r).StrandedTaints {
			out[s.Key] = s.Nodes
		}
		return out
	}
	f := strandedFake(t)
	got := keysOf(f)
	if len(got) != 2 || strings.Join(got["example.com/old-sick"], ",") != "ip-10-0-1-1" || strings.Join(got["example.com/old-boot"], ",") != "ip-10-0-1-2,ip-10-0-1-3" {
		t.Errorf("after the key change: stranded %v; want example.com/old-sick on ip-10-0-1-1 and example.com/old-boot on ip-10-0-1-2 and -3", got)
	}
	// The old keys listed in --previous-taint-keys: the agent removes them.
	ds := presetDS(api.PresetNone, "example.com/booting=true:NoSchedule", "example.com/old-boot", "example.com/old-sick")
	f.daemonSets = []appsv1.DaemonSet{ds}
	if got := keysOf(f); len(got) != 0 {
		t.Errorf("with --previous-taint-keys: stranded %v; want none", got)
	}
	// The same given only in the environment.
	ds = presetDS(api.PresetNone, "example.com/booting=true:NoSchedule")
	ds.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KNR_AGENT_PREVIOUS_TAINT_KEYS", Value: "example.com/old-boot,example.com/old-sick"}}
	f.daemonSets = []appsv1.DaemonSet{ds}
	if got := keysOf(f); len(got) != 0 {
		t.Errorf("agent with KNR_AGENT_PREVIOUS_TAINT_KEYS: stranded %v; want none", got)
	}
	// Nodes not read: nothing said about taints, and the read is named.
	f = strandedFake(t)
	f.forbid["list nodes"] = true
	code, _, errOut, _ := run(f, "", "doctor")
	if code != ExitIncomplete && code != ExitError || !strings.Contains(errOut, "not allowed to list nodes") {
		t.Errorf("nodes forbidden: exit %d, stderr %s", code, errOut)
	}
	// Revisions not read: a warning, and the keys only they name are not
	// known to be ours.
	f = strandedFake(t)
	f.forbid["list controllerrevisions.apps "+workloadtest.Namespace] = true
	code, out, errOut, _ := run(f, "", "doctor")
	if !strings.Contains(errOut, "warning: not allowed to list controllerrevisions.apps in namespace kube-node-ready") ||
		strings.Contains(out, "example.com/old-boot") {
		t.Errorf("revisions forbidden: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestStrandedFixesKeepOtherKeys: the helm fix lists the user's previous
// keys and every stranded key at once, so applying the fix of one finding
// never drops another's key; a key that may not be a previous key (a
// Kubernetes domain) is handed to the agent's own taint instead.
func TestStrandedFixesKeepOtherKeys(t *testing.T) {
	in := Install{Namespace: "ops", Release: "knr", ChartVersion: "0.2.0", Agent: "DaemonSet ops/knr"}
	o := agentOwner{in: in, startup: "a.example/boot=true:NoSchedule", unhealthy: "a.example/sick=true:NoSchedule", previous: []string{"a.example/p"}}
	fixes := strandedFixes(StrandedTaint{Key: "a.example/old", Role: RoleStartup, Nodes: []string{"n1", "n2"}}, []agentOwner{o},
		[]string{"a.example/old", "x.kubernetes.io/boot"})
	want := "helm upgrade knr oci://ghcr.io/kube-node-ready/charts/kube-node-ready --version 0.2.0 --namespace ops --reset-then-reuse-values --set 'agent.previousTaintKeys={a.example/p,a.example/old}'"
	if len(fixes) != 1 || !strings.HasSuffix(fixes[0], want) {
		t.Errorf("fixes %q; want one ending %s", fixes, want)
	}
	fixes = strandedFixes(StrandedTaint{Key: "x.kubernetes.io/boot", Role: RoleStartup, Nodes: []string{"n1", "n2"}}, []agentOwner{o}, nil)
	want = `for node in n1 n2; do kubectl taint node "$node" --overwrite a.example/boot=true:NoSchedule x.kubernetes.io/boot-; done`
	if len(fixes) != 1 || !strings.HasSuffix(fixes[0], want) {
		t.Errorf("fixes %q; want one ending %s", fixes, want)
	}
}

func TestChartVersion(t *testing.T) {
	for _, tt := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{chartLabel: "kube-node-ready-0.1.0", nameLabel: "kube-node-ready"}, "0.1.0"},
		{map[string]string{chartLabel: "kube-node-ready-1.2.0-rc.1", nameLabel: "renamed"}, "1.2.0-rc.1"},
		{map[string]string{versionLabel: "0.3.0"}, "0.3.0"},
		{map[string]string{}, ""},
	} {
		if got := chartVersion(tt.labels); got != tt.want {
			t.Errorf("chartVersion(%v) = %q, want %q", tt.labels, got, tt.want)
		}
	}
}
