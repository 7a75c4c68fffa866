package doctor

import (
	"fmt"
	"strings"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
)

// PublishedChart is the chart as releases publish it (docs/development.md):
// the helm fixes name it, with the deployed chart's version, so they run
// from any directory.
const PublishedChart = "oci://ghcr.io/kube-node-ready/charts/kube-node-ready"

// ChartRef is the chart the helm fixes of in upgrade to: the published
// chart at the version deployed, or, when the version is unknown, its
// newest (helm's default).
func ChartRef(in Install) string {
	if in.ChartVersion == "" {
		return PublishedChart
	}
	return PublishedChart + " --version " + in.ChartVersion
}

// HelmUpgrade is the helm command that upgrades in's release (which must
// be set) in place, keeping the values the user set, with sets added
// (each a --set argument, quoted for a shell when it needs it).
func HelmUpgrade(in Install, sets ...string) string {
	cmd := fmt.Sprintf("helm upgrade %s %s --namespace %s --reset-then-reuse-values", in.Release, ChartRef(in), in.Namespace)
	for _, s := range sets {
		cmd += " --set " + shellWord(s)
	}
	return cmd
}

// shellWord quotes s for a POSIX shell when it holds a character the shell
// would read (braces expand, commas inside them split): single quotes,
// which no key or value of ours holds.
func shellWord(s string) string {
	if strings.ContainsAny(s, "{},*?[]$`\\\"' ;&|<>()!#~") {
		return "'" + s + "'"
	}
	return s
}

// kubectlPatch is a `kubectl patch` command applying a JSON patch. Keys and
// values never hold a single quote, so the patch is quoted with them.
func kubectlPatch(target string, ops ...jsonpatch.Op) string {
	patch, _ := jsonpatch.Marshal(ops...) // strings and Taints always encode
	return fmt.Sprintf("kubectl patch %s --type=json -p '%s'", target, patch)
}

// caFlagFix appends flags to a visible Cluster Autoscaler's command line:
// a later flag wins over an earlier one, and list flags add up.
func caFlagFix(c ClusterAutoscaler, flags ...string) string {
	path := fmt.Sprintf("/spec/template/spec/containers/%d/%s", c.Container, c.ArgsField)
	ops := []jsonpatch.Op{jsonpatch.Add(path, flags)}
	if !c.ArgsAbsent {
		ops = ops[:0]
		for _, f := range flags {
			ops = append(ops, jsonpatch.Add(path+"/-", f))
		}
	}
	return "add " + strings.Join(flags, " ") + " to Cluster Autoscaler's flags: " +
		kubectlPatch("deployment "+c.Name+" -n "+c.Namespace, ops...)
}

const poolTaintsPath = "/spec/template/spec/"

// startupTaintFix makes a NodePool declare t as a startup taint: it takes
// t's key out of the permanent taints, replaces an entry of startupTaints
// with the same key (another effect) or old key, or adds t. Each removal or
// replacement is guarded by a test of the key it expects there.
func startupTaintFix(p NodePool, t Taint, old string) string {
	var ops []jsonpatch.Op
	if i := index(p.Taints, t.Key); i >= 0 {
		at := fmt.Sprintf("%staints/%d", poolTaintsPath, i)
		ops = append(ops, jsonpatch.Test(at+"/key", t.Key), jsonpatch.Remove(at))
	}
	replace := index(p.StartupTaints, t.Key)
	if replace < 0 && old != "" {
		replace = index(p.StartupTaints, old)
	}
	switch {
	case replace >= 0:
		at := fmt.Sprintf("%sstartupTaints/%d", poolTaintsPath, replace)
		ops = append(ops, jsonpatch.Test(at+"/key", p.StartupTaints[replace].Key), jsonpatch.Replace(at, t))
	case len(p.StartupTaints) == 0:
		ops = append(ops, jsonpatch.Add(poolTaintsPath+"startupTaints", []Taint{t}))
	default:
		ops = append(ops, jsonpatch.Add(poolTaintsPath+"startupTaints/-", t))
	}
	return "declare " + t.String() + " in spec.template.spec.startupTaints" + driftNote + ": " + kubectlPatch(p.Ref(), ops...)
}

// driftNote warns that a NodePool fix replaces the pool's nodes: Karpenter
// hashes spec.template's taints and startupTaints, so a changed NodePool
// marks its nodes drifted.
const driftNote = " (Karpenter then replaces the pool's nodes as drifted, within its disruption budgets)"

// removeStartupTaintFix drops the entry of key from a NodePool's
// startupTaints, for a previous key next to the current one.
func removeStartupTaintFix(p NodePool, key string) string {
	at := fmt.Sprintf("%sstartupTaints/%d", poolTaintsPath, index(p.StartupTaints, key))
	return "drop " + key + " from spec.template.spec.startupTaints" + driftNote + ": " +
		kubectlPatch(p.Ref(), jsonpatch.Test(at+"/key", key), jsonpatch.Remove(at))
}

// presetFix switches the installation to a preset of the chart.
func presetFix(in Install, preset string) string {
	if in.Release != "" {
		// --reset-then-reuse-values: the chart's new defaults under the
		// values the user set; the explicit keys are cleared, since any
		// key set (by the user, or by an older chart's defaults) wins over
		// the preset.
		return fmt.Sprintf("use the chart's %s preset: %s", preset,
			HelmUpgrade(in, "autoscaler="+preset, "agent.startupTaint.key=", "agent.retaintTaint.key="))
	}
	s, u := presetTaint(preset, RoleStartup), presetTaint(preset, RoleUnhealthy)
	return fmt.Sprintf("use the keys of the chart's %s preset: the agent's --startup-taint=%s --unhealthy-taint=%s, and the same in the webhook's --agent-startup-taint and --agent-unhealthy-taint",
		preset, s, u)
}

// deadlineFix lowers the webhook's --unverified-deadline to below limit.
func deadlineFix(in Install, limit time.Duration) string {
	d := limit - time.Minute
	if d <= 0 {
		d = limit / 2
	}
	if in.Release != "" {
		return "act before Cluster Autoscaler gives up: " + HelmUpgrade(in, "webhook.remediation.unverifiedDeadline="+ShortDuration(d))
	}
	return "act before Cluster Autoscaler gives up: set the webhook's --unverified-deadline=" + ShortDuration(d)
}

// ShortDuration writes d as the flags take it, without zero units: 14m, 1h30m.
func ShortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
