package gates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
	"github.com/kube-node-ready/kube-node-ready/internal/placement"
)

// DaemonSetSource is what the daemonsets gate reads: caches kept by
// watches, so a round costs no request.
type DaemonSetSource interface {
	// DaemonSets returns every DaemonSet of the cluster.
	DaemonSets() []*appsv1.DaemonSet
	// PodsOnNode returns the pods bound to this node.
	PodsOnNode() []*corev1.Pod
	// Synced reports whether both have been listed once.
	Synced() bool
}

// DaemonSetExclusion names DaemonSets the gate does not wait for: a
// namespace and a name, either of which may be a shell pattern such as *.
type DaemonSetExclusion struct {
	Namespace, Name string
}

func (e DaemonSetExclusion) String() string { return e.Namespace + "/" + e.Name }

// Matches reports whether ds is excluded by e.
func (e DaemonSetExclusion) Matches(ds *appsv1.DaemonSet) bool {
	ns, _ := path.Match(e.Namespace, ds.Namespace)
	name, _ := path.Match(e.Name, ds.Name)
	return ns && name
}

// ParseDaemonSetExclusion parses namespace/name (patterns allowed).
func ParseDaemonSetExclusion(s string) (DaemonSetExclusion, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" {
		return DaemonSetExclusion{}, fmt.Errorf("exclusion %q: want namespace/name, such as kube-system/* or monitoring/node-exporter", s)
	}
	for _, p := range []string{ns, name} {
		if _, err := path.Match(p, ""); err != nil {
			return DaemonSetExclusion{}, fmt.Errorf("exclusion %q: bad pattern %q: %v", s, p, err)
		}
	}
	return DaemonSetExclusion{Namespace: ns, Name: name}, nil
}

// DaemonSets is the DaemonSet gate: it passes when the pod of every
// DaemonSet that will run on this node is Ready, so workloads do not land
// before the node's CNI, CSI or log shipper works. A DaemonSet not Ready
// within Timeout is reported once and no longer waited for.
type DaemonSets struct {
	// Node returns the node as last seen; nil when it is not known yet.
	Node func() *corev1.Node
	// Source lists DaemonSets and the pods on this node.
	Source DaemonSetSource
	// SelfPod is the agent's own pod (namespace/name); its DaemonSet is never waited for.
	SelfPod string
	// IgnoreTaints are taint keys ignored when deciding whether a DaemonSet
	// will run here: the startup taints, which its pods need not tolerate.
	IgnoreTaints []string
	// Exclude names DaemonSets not to wait for.
	Exclude []DaemonSetExclusion
	// ExcludeSelector matches the labels of DaemonSets not to wait for; nil matches none.
	ExcludeSelector labels.Selector
	// Timeout is how long one DaemonSet is waited for; 0 waits for ever.
	Timeout time.Duration
	// OnTimeout is told once about each DaemonSet given up on.
	OnTimeout func(daemonSet string, waited time.Duration)
	// Log receives the gate's rare notes.
	Log *slog.Logger

	// watch feeds Source when the gate was built from its flags; nil in
	// tests that give a Source of their own.
	watch *daemonSetWatch
	host  checks.GateHost
	// exclusionsChecked is set once unmatched exclusions were reported.
	exclusionsChecked atomic.Bool

	mu      sync.Mutex
	since   map[types.UID]time.Time
	givenUp map[types.UID]bool
	now     func() time.Time
}

// Name implements Check.
func (*DaemonSets) Name() string { return "daemonsets" }

// Run implements Check.
func (d *DaemonSets) Run(context.Context) error {
	node := d.Node()
	if node == nil {
		return errors.New("daemonsets: node not seen yet")
	}
	if !d.Source.Synced() {
		return errors.New("daemonsets: DaemonSets and pods on this node not listed yet")
	}
	pending := d.Pending(node)
	if len(pending) == 0 {
		return nil
	}
	return fmt.Errorf("daemonsets: waiting for %s", strings.Join(pending, ", "))
}

// Attach implements Gate: the gate reads the loop's node, reports what it
// gives up on through the loop, and wakes it when its wait ends.
func (d *DaemonSets) Attach(h checks.GateHost) {
	d.host = h
	d.Node = h.Node
	d.OnTimeout = func(ds string, waited time.Duration) { h.DaemonSetTimedOut(ds, waited, d.Timeout) }
}

// Start implements Gate: it runs the DaemonSet and pod watches.
func (d *DaemonSets) Start(ctx context.Context, wait time.Duration) {
	if d.watch == nil {
		return
	}
	d.watch.start(ctx)
	waitSynced(ctx, wait, d.watch.Synced)
	if d.watch.Synced() && d.Log != nil && !d.exclusionsChecked.Swap(true) {
		for _, e := range d.Unmatched() {
			d.Log.Warn("gate exclusion matches no DaemonSet", "exclusion", e)
		}
	}
}

// Stop implements Gate.
func (d *DaemonSets) Stop() {
	if d.watch != nil {
		d.watch.stop()
	}
}

// Changed implements Gate: the gate's answer follows the DaemonSets and
// pods, whose own watch wakes the loop (see changed).
func (*DaemonSets) Changed(_, _ *corev1.Node) bool { return false }

// changed wakes the loop when the gate, the last thing a new node may be
// waiting for, now passes: the untaint should not wait for the next
// backoff step.
func (d *DaemonSets) changed() {
	if d.host == nil || !d.host.Verifying() || !d.Source.Synced() {
		return
	}
	if node := d.host.Node(); node != nil && len(d.Pending(node)) == 0 {
		d.host.Wake()
	}
}

// Pending describes each DaemonSet still waited for, such as
// "kube-system/cilium (pod cilium-x7k2p not Ready)", applying the timeout.
func (d *DaemonSets) Pending(node *corev1.Node) []string {
	pods := d.Source.PodsOnNode()
	self := d.selfOwner(pods)
	now := time.Now()
	if d.now != nil {
		now = d.now()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.since == nil {
		d.since, d.givenUp = map[types.UID]time.Time{}, map[types.UID]bool{}
	}
	var pending []string
	waiting := map[types.UID]bool{}
	for _, ds := range d.Source.DaemonSets() {
		if ds.UID == self || d.excluded(ds) || d.givenUp[ds.UID] || !WillRunOn(ds, node, d.IgnoreTaints) {
			continue
		}
		state := podState(ds, pods)
		if state == "" {
			continue
		}
		waiting[ds.UID] = true
		first, ok := d.since[ds.UID]
		if !ok {
			first = now
			d.since[ds.UID] = now
		}
		name := ds.Namespace + "/" + ds.Name
		if d.Timeout > 0 && now.Sub(first) >= d.Timeout {
			d.givenUp[ds.UID] = true
			if d.OnTimeout != nil {
				d.OnTimeout(name, now.Sub(first))
			}
			continue
		}
		pending = append(pending, name+" ("+state+")")
	}
	// A DaemonSet that became Ready starts its clock again if it regresses.
	for uid := range d.since {
		if !waiting[uid] {
			delete(d.since, uid)
		}
	}
	slices.Sort(pending)
	return pending
}

// Unmatched returns the exclusions that match no DaemonSet: likely typos.
func (d *DaemonSets) Unmatched() []string {
	var out []string
	for _, e := range d.Exclude {
		if !slices.ContainsFunc(d.Source.DaemonSets(), e.Matches) {
			out = append(out, e.String())
		}
	}
	return out
}

func (d *DaemonSets) excluded(ds *appsv1.DaemonSet) bool {
	if d.ExcludeSelector != nil && d.ExcludeSelector.Matches(labels.Set(ds.Labels)) {
		return true
	}
	return slices.ContainsFunc(d.Exclude, func(e DaemonSetExclusion) bool { return e.Matches(ds) })
}

// selfOwner is the UID of the DaemonSet that owns the agent's own pod.
func (d *DaemonSets) selfOwner(pods []*corev1.Pod) types.UID {
	for _, p := range pods {
		if p.Namespace+"/"+p.Name != d.SelfPod {
			continue
		}
		for _, ref := range p.OwnerReferences {
			if ref.Controller != nil && *ref.Controller && ref.Kind == "DaemonSet" {
				return ref.UID
			}
		}
	}
	return ""
}

// podState is why ds's pod on this node is not Ready yet, or "" when it is.
func podState(ds *appsv1.DaemonSet, pods []*corev1.Pod) string {
	for _, p := range pods {
		owned := slices.ContainsFunc(p.OwnerReferences, func(r metav1.OwnerReference) bool {
			return r.UID == ds.UID && r.Controller != nil && *r.Controller
		})
		if !owned || p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return ""
			}
		}
		return "pod " + p.Name + " not Ready"
	}
	return "no pod on this node yet"
}

// WillRunOn reports whether ds places a pod on node, as the DaemonSet
// controller decides it (node name, node selector, required node affinity,
// NoSchedule and NoExecute taints against its tolerations), with the taints
// whose keys are in ignore left out.
func WillRunOn(ds *appsv1.DaemonSet, node *corev1.Node, ignore []string) bool {
	return placement.DaemonPodRunsOn(&ds.Spec.Template.Spec, node, ignore)
}
