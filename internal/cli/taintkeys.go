package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// TaintFlags are the taint flags both binaries share: --autoscaler picks a
// preset of keys, --startup-taint and --unhealthy-taint (the webhook's
// --agent-*) override it, and --previous-taint-keys adds keys an earlier
// configuration used to the presets' own.
type TaintFlags struct {
	// Autoscaler names the preset (api.Presets).
	Autoscaler string
	// Startup and Unhealthy are key=value:Effect; empty takes the preset's.
	Startup, Unhealthy string
	// Previous are the user's previous keys.
	Previous []string
}

// TaintKeys are the taints TaintFlags resolve to.
type TaintKeys struct {
	// Startup and Unhealthy are the taints written, key=value:Effect.
	Startup, Unhealthy string
	// PreviousStartup are the keys recognized as a startup taint and
	// removed with it: every preset's startup key and the user's previous
	// keys, the configured keys left out.
	PreviousStartup []string
	// PreviousUnhealthy are the keys recognized as an unhealthy taint:
	// every preset's unhealthy key, the configured keys left out.
	PreviousUnhealthy []string
}

// Resolve applies the preset and the overrides. The user's previous keys
// count as startup keys (a seed or preset unhealthy key among them stays
// one): the verified label "false" still marks a node re-tainted with one.
func (f TaintFlags) Resolve() (TaintKeys, error) {
	p, ok := api.LookupPreset(f.Autoscaler)
	if !ok {
		return TaintKeys{}, fmt.Errorf("unknown autoscaler %q (known: %s)", f.Autoscaler, strings.Join(api.PresetNames(), ", "))
	}
	k := TaintKeys{Startup: orDefault(f.Startup, p.StartupTaint()), Unhealthy: orDefault(f.Unhealthy, p.UnhealthyTaint())}
	current := make([]string, 0, 2)
	for _, s := range []string{k.Startup, k.Unhealthy} {
		t, err := ParseTaint(s)
		if err != nil {
			return TaintKeys{}, err
		}
		current = append(current, t.Key)
	}
	for _, key := range f.Previous {
		if err := PreviousTaintKey(key); err != nil {
			return TaintKeys{}, fmt.Errorf("previous taint key %q: %w", key, err)
		}
	}
	others := func(keys []string) []string {
		return slices.DeleteFunc(keys, func(key string) bool { return slices.Contains(current, key) })
	}
	unhealthy := api.PreviousUnhealthyTaintKeys()
	user := slices.DeleteFunc(slices.Clone(f.Previous), func(key string) bool { return slices.Contains(unhealthy, key) })
	k.PreviousStartup = others(dedupe(append(api.PreviousStartupTaintKeys(), user...)))
	k.PreviousUnhealthy = others(unhealthy)
	return k, nil
}

// Check adds each invalid taint flag to p under its name: --autoscaler and
// --previous-taint-keys, and the startup and unhealthy taints under the
// names each binary gives them.
func (f TaintFlags) Check(p *Problems, startupFlag, unhealthyFlag string) {
	if _, ok := api.LookupPreset(f.Autoscaler); !ok {
		p.Add("autoscaler", "unknown preset %q (known: %s)", f.Autoscaler, strings.Join(api.PresetNames(), ", "))
	}
	for _, t := range []struct{ flag, taint string }{{startupFlag, f.Startup}, {unhealthyFlag, f.Unhealthy}} {
		if t.taint != "" {
			_, err := ParseTaint(t.taint)
			p.Check(t.flag, err)
		}
	}
	for _, key := range f.Previous {
		p.Check("previous-taint-keys", PreviousTaintKey(key))
	}
}

// PreviousTaintKey checks a key given to --previous-taint-keys: a qualified
// name outside the domains Kubernetes and Karpenter reserve for their own
// taints (node.kubernetes.io/unreachable, karpenter.sh/unregistered, ...),
// since the agent removes such a key from its node and remediation counts
// a node carrying it as unverified. The readiness prefixes the autoscalers
// understand (readiness.k8s.io/, Cluster Autoscaler's startup-, status- and
// ignore-taint prefixes) are taints of readiness tools and stay allowed.
func PreviousTaintKey(key string) error {
	if err := QualifiedName(key); err != nil {
		return err
	}
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return nil
	}
	for _, allowed := range []string{"readiness.k8s.io", "startup-taint.cluster-autoscaler.kubernetes.io",
		"status-taint.cluster-autoscaler.kubernetes.io", "ignore-taint.cluster-autoscaler.kubernetes.io"} {
		if domain == allowed {
			return nil
		}
	}
	for _, reserved := range []string{"kubernetes.io", "k8s.io", "karpenter.sh"} {
		if domain == reserved || strings.HasSuffix(domain, "."+reserved) {
			return fmt.Errorf("%s/ is reserved for the taints of Kubernetes or Karpenter: kube-node-ready never removes them", domain)
		}
	}
	return nil
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// dedupe drops repeated keys, keeping the first of each.
func dedupe(keys []string) []string {
	var out []string
	for _, k := range keys {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}
