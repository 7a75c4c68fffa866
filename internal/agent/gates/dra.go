package gates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
)

// DRA is the dynamic resource allocation gate: it passes when, for each
// named DRA driver, the node's ResourceSlices publish the driver's pools
// in full (every slice of each pool's newest generation), which is what
// Karpenter's initialization waits for and what the scheduler needs to
// place a pod with a ResourceClaim on the node. It reads one watch of the
// ResourceSlices whose spec.nodeName is this node.
//
// A cluster that does not serve resource.k8s.io/v1 can never publish a
// slice: the gate then fails and says so, rather than wait with no word
// or pass as if the drivers were there. It asks discovery again on each
// round until the API is served (one small request per round).
type DRA struct {
	watchGate
	// Drivers are the DRA driver names to wait for, such as gpu.nvidia.com.
	Drivers []string
	// Served asks the cluster whether it serves resource.k8s.io/v1.
	Served func(context.Context) (bool, error)
	// Log receives the gate's rare notes.
	Log *slog.Logger

	mu sync.Mutex
	// discovered is what the last discovery said: nil before one ran or
	// after it failed, then whether the API is served.
	discovered *bool
	// discoverErr is the last discovery's error.
	discoverErr error
	// unservedLogged is set while the API is not served and that was logged.
	unservedLogged bool
}

// newDRA returns the gate reading source.
func newDRA(drivers []string, source objectSource) *DRA {
	g := &DRA{Drivers: drivers}
	g.source = source
	g.met = func() bool { return len(g.unpublished()) == 0 }
	return g
}

// Name implements Check.
func (*DRA) Name() string { return "dra" }

// Start implements Gate: the watch of the node's ResourceSlices starts once
// discovery says the cluster serves them; discovery waits at most wait.
func (g *DRA) Start(ctx context.Context, wait time.Duration) {
	if !g.discover(ctx, wait) {
		return
	}
	g.watchGate.Start(ctx, wait)
}

// discover reports whether resource.k8s.io/v1 is served, asking the
// cluster until it says yes.
func (g *DRA) discover(ctx context.Context, wait time.Duration) bool {
	g.mu.Lock()
	known := g.discovered != nil && *g.discovered
	g.mu.Unlock()
	if known || g.Served == nil { // served, or a gate built in a test on a fake source
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ok, err := g.Served(ctx)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.discoverErr, g.discovered = err, nil
	if err != nil {
		return false
	}
	g.discovered = &ok
	if !ok && !g.unservedLogged && g.Log != nil {
		g.Log.Warn("dra gate: the cluster does not serve resource.k8s.io/v1; the node stays unverified until it does or the gate is turned off",
			"drivers", strings.Join(g.Drivers, ","))
	}
	g.unservedLogged = !ok
	return ok
}

// Run implements Check.
func (g *DRA) Run(context.Context) error {
	g.mu.Lock()
	discovered, discoverErr := g.discovered, g.discoverErr
	g.mu.Unlock()
	switch {
	case g.Served != nil && discoverErr != nil:
		return fmt.Errorf("dra: cannot tell whether the cluster serves resource.k8s.io/v1: %w", discoverErr)
	case g.Served != nil && discovered != nil && !*discovered:
		return fmt.Errorf("dra: the cluster does not serve resource.k8s.io/v1, so no ResourceSlice can be published for %s: enable the API (Kubernetes 1.34 or later) or turn the gate off (--gate.dra)",
			strings.Join(g.Drivers, ", "))
	case !g.source.synced():
		return errors.New("dra: this node's ResourceSlices not listed yet")
	}
	if missing := g.unpublished(); len(missing) > 0 {
		return fmt.Errorf("dra: not published for this node yet: %s", strings.Join(missing, ", "))
	}
	return nil
}

func (g *DRA) unpublished() []string {
	var rs []*resourcev1.ResourceSlice
	for _, o := range g.source.objects() {
		if s, ok := o.(*resourcev1.ResourceSlice); ok {
			rs = append(rs, s)
		}
	}
	return UnpublishedDrivers(rs, g.Drivers)
}

// UnpublishedDrivers describes each driver whose pools the slices do not
// publish in full, in the order given: "gpu.example.com (no ResourceSlice)"
// or "gpu.example.com (pool node-1: 1 of 2 slices)". A pool is published
// when every slice of its newest generation is there (a driver writes a
// large pool as several slices, and replaces a pool by a new generation).
func UnpublishedDrivers(rs []*resourcev1.ResourceSlice, drivers []string) []string {
	var out []string
	for _, d := range drivers {
		newest := map[string]int64{}
		for _, s := range rs {
			if s.Spec.Driver == d {
				newest[s.Spec.Pool.Name] = max(newest[s.Spec.Pool.Name], s.Spec.Pool.Generation)
			}
		}
		if len(newest) == 0 {
			out = append(out, d+" (no ResourceSlice)")
			continue
		}
		var partial []string
		for _, pool := range slices.Sorted(maps.Keys(newest)) {
			have, want := int64(0), int64(1)
			for _, s := range rs {
				if s.Spec.Driver == d && s.Spec.Pool.Name == pool && s.Spec.Pool.Generation == newest[pool] {
					have++
					want = max(want, s.Spec.Pool.ResourceSliceCount)
				}
			}
			if have < want {
				partial = append(partial, fmt.Sprintf("pool %s: %d of %d slices", pool, have, want))
			}
		}
		if len(partial) > 0 {
			out = append(out, d+" ("+strings.Join(partial, "; ")+")")
		}
	}
	return out
}
