package kubectlplugin

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// TestStatusReadsTheDeployedKeys: status names a node carrying the
// deployed agent's own startup taint or one of its --previous-taint-keys;
// without leave to read the DaemonSets it warns once and still names every
// preset's keys.
func TestStatusReadsTheDeployedKeys(t *testing.T) {
	setup := func() *fakeAPI {
		f := newFake(keyedFleet()...)
		ds := workloadtest.AgentDaemonSet("example.com/booting=true:NoSchedule", api.UnhealthyTaint)
		c := &ds.Spec.Template.Spec.Containers[0]
		c.Args = append(c.Args, "--autoscaler=none", "--previous-taint-keys=example.com/old-boot")
		f.daemonSets = append(f.daemonSets, ds)
		return f
	}
	row := func(out, name string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, name+" ") {
				return columns(l)
			}
		}
		return ""
	}
	code, out, errOut, _ := run(setup(), "", "status")
	if code != ExitOK || errOut != "" {
		t.Fatalf("status: exit %d, stderr %q", code, errOut)
	}
	for name, want := range map[string]string{
		"custom-startup":    "custom-startup | unknown | unverified",
		"custom-previous":   "custom-previous | unknown | unverified",
		"ca-startup":        "ca-startup | unknown | unverified",
		"karpenter-startup": "karpenter-startup | unknown | unverified",
		"ca-status":         "ca-status | false | unhealthy",
		"not-ours":          "not-ours | true | none",
	} {
		if got := row(out, name); !strings.HasPrefix(got, want) {
			t.Errorf("%s: row %q, want it to start %q", name, got, want)
		}
	}

	f := setup()
	f.forbid["list daemonsets.apps *"] = true
	f.forbid["list daemonsets.apps default"] = true
	code, out, errOut, _ = run(f, "", "status")
	if code != ExitOK || strings.Count(errOut, "warning:") != 1 || !strings.Contains(errOut, "not allowed to list daemonsets.apps") ||
		!strings.Contains(errOut, "only the presets' taint keys are recognized") {
		t.Errorf("status without DaemonSet access: exit %d, stderr %q; want one warning", code, errOut)
	}
	if row(out, "custom-startup") == "" || !strings.HasPrefix(row(out, "custom-startup"), "custom-startup | unknown | none") ||
		!strings.HasPrefix(row(out, "karpenter-startup"), "karpenter-startup | unknown | unverified") {
		t.Errorf("status without DaemonSet access:\n%s", out)
	}

	f = setup()
	f.forbid["list daemonsets.apps *"] = true
	f.daemonSets[0].Namespace = "default" // the context's namespace
	if code, out, errOut, _ = run(f, "", "why", "custom-startup"); code != ExitOK || errOut != "" ||
		!strings.Contains(out, "unverified  (example.com/booting)") {
		t.Errorf("why, DaemonSets listable in the context's namespace only: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestTaintKeysOn: a key that is both a startup and an unhealthy key (an
// agent re-tainting with its startup taint) names the node unverified;
// each key on the node is listed once, startup keys first.
func TestTaintKeysOn(t *testing.T) {
	k := TaintKeys{Startup: []string{"a/start"}, Unhealthy: []string{"a/start", "b/sick"}}
	n := testNode("n", "false", []corev1.Taint{{Key: "b/sick"}, {Key: "a/start", Effect: corev1.TaintEffectNoExecute}, {Key: "a/start"}}, nil)
	names, keys := k.on(&n)
	if !slices.Equal(names, []string{taintUnverified, taintUnhealthy}) || !slices.Equal(keys, []string{"a/start", "b/sick"}) {
		t.Errorf("on = %v %v, want [unverified unhealthy] [a/start b/sick]", names, keys)
	}
	n.Spec.Taints = n.Spec.Taints[1:2]
	if names, keys = k.on(&n); !slices.Equal(names, []string{taintUnverified}) || !slices.Equal(keys, []string{"a/start"}) {
		t.Errorf("on = %v %v, want [unverified] [a/start]", names, keys)
	}
}
