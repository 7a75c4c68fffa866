package gates

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// listSource is an objectSource over a fixed list.
type listSource struct {
	objs     []any
	unsynced bool
}

func (s *listSource) objects() []any { return s.objs }
func (s *listSource) synced() bool   { return !s.unsynced }

// wakeHost is a GateHost that counts wake-ups.
type wakeHost struct {
	verifying bool
	wakes     atomic.Int32
}

func (*wakeHost) Node() *corev1.Node                                     { return gateNode() }
func (h *wakeHost) Verifying() bool                                      { return h.verifying }
func (h *wakeHost) Wake()                                                { h.wakes.Add(1) }
func (*wakeHost) DaemonSetTimedOut(string, time.Duration, time.Duration) {}

func csiNode(drivers ...string) *storagev1.CSINode {
	n := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, d := range drivers {
		n.Spec.Drivers = append(n.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: "i-1"})
	}
	return n
}

func TestCSIDriversGate(t *testing.T) {
	want := []string{"ebs.csi.aws.com", "efs.csi.aws.com"}
	tests := []struct {
		name    string
		source  *listSource
		wantErr string
	}{
		{name: "not listed yet", source: &listSource{unsynced: true}, wantErr: "csidrivers: this node's CSINode not listed yet"},
		{name: "no CSINode yet", source: &listSource{}, wantErr: "csidrivers: no CSINode for this node yet (the kubelet creates it), waiting for ebs.csi.aws.com, efs.csi.aws.com"},
		{name: "one registered", source: &listSource{objs: []any{csiNode("efs.csi.aws.com")}}, wantErr: "csidrivers: not registered on this node yet: ebs.csi.aws.com"},
		{name: "both registered, and another", source: &listSource{objs: []any{csiNode("other.example.com", "efs.csi.aws.com", "ebs.csi.aws.com")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newCSIDrivers(want, tt.source).Run(t.Context())
			if got := errString(err); got != tt.wantErr {
				t.Errorf("Run = %q, want %q", got, tt.wantErr)
			}
		})
	}
}

func TestExtendedResourcesGate(t *testing.T) {
	node := func(alloc corev1.ResourceList) *corev1.Node {
		n := gateNode()
		n.Status.Allocatable = alloc
		return n
	}
	g := &ExtendedResources{Required: []corev1.ResourceName{"nvidia.com/gpu", "example.com/fpga"}}
	tests := []struct {
		name    string
		node    *corev1.Node
		wantErr string
	}{
		{name: "node not seen", wantErr: "extendedresources: node not seen yet"},
		{name: "nothing registered", node: node(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}),
			wantErr: "extendedresources: nvidia.com/gpu not allocatable, example.com/fpga not allocatable"},
		{name: "registered with no device yet", node: node(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0"), "example.com/fpga": resource.MustParse("1")}),
			wantErr: "extendedresources: nvidia.com/gpu allocatable is 0"},
		{name: "both positive", node: node(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "example.com/fpga": resource.MustParse("1")})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g.Node = func() *corev1.Node { return tt.node }
			if got := errString(g.Run(t.Context())); got != tt.wantErr {
				t.Errorf("Run = %q, want %q", got, tt.wantErr)
			}
		})
	}
	// The loop wakes when the wait ends, not on every heartbeat.
	none := node(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")})
	some := node(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "example.com/fpga": resource.MustParse("1")})
	if !g.Changed(none, some) || g.Changed(none, none) || g.Changed(some, some) {
		t.Error("Changed is not 'the gate's answer changed'")
	}
}

func slice(driver, pool string, gen, count int64) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: new("n1"),
		Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count},
	}}
}

func TestUnpublishedDrivers(t *testing.T) {
	drivers := []string{"gpu.example.com", "nic.example.com"}
	tests := []struct {
		name   string
		slices []*resourcev1.ResourceSlice
		want   []string
	}{
		{name: "none", want: []string{"gpu.example.com (no ResourceSlice)", "nic.example.com (no ResourceSlice)"}},
		{name: "one pool of two slices, one there", slices: []*resourcev1.ResourceSlice{slice("gpu.example.com", "n1", 1, 2), slice("nic.example.com", "n1", 1, 1)},
			want: []string{"gpu.example.com (pool n1: 1 of 2 slices)"}},
		{name: "old generation does not count", slices: []*resourcev1.ResourceSlice{
			slice("gpu.example.com", "n1", 1, 2), slice("gpu.example.com", "n1", 1, 2), slice("gpu.example.com", "n1", 2, 2), slice("nic.example.com", "n1", 3, 1)},
			want: []string{"gpu.example.com (pool n1: 1 of 2 slices)"}},
		{name: "every pool complete", slices: []*resourcev1.ResourceSlice{
			slice("gpu.example.com", "a", 1, 2), slice("gpu.example.com", "a", 1, 2), slice("gpu.example.com", "b", 4, 1), slice("nic.example.com", "n1", 1, 1)}},
		{name: "other drivers' slices do not count", slices: []*resourcev1.ResourceSlice{slice("other.example.com", "n1", 1, 1), slice("nic.example.com", "n1", 1, 1)},
			want: []string{"gpu.example.com (no ResourceSlice)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnpublishedDrivers(tt.slices, drivers); !slices.Equal(got, tt.want) {
				t.Errorf("UnpublishedDrivers = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDRAGateServed: where the cluster does not serve resource.k8s.io/v1
// the gate fails and says so (no watch is started), asks again on the
// next round, and waits for the slices once the API is served.
func TestDRAGateServed(t *testing.T) {
	src := &listSource{objs: []any{slice("gpu.example.com", "n1", 1, 1)}}
	g := newDRA([]string{"gpu.example.com"}, src)
	var served atomic.Bool
	var asked atomic.Int32
	g.Served = func(context.Context) (bool, error) { asked.Add(1); return served.Load(), nil }
	g.Start(t.Context(), time.Second)
	if err := errString(g.Run(t.Context())); !strings.Contains(err, "the cluster does not serve resource.k8s.io/v1, so no ResourceSlice can be published for gpu.example.com") {
		t.Errorf("Run while unserved = %q", err)
	}
	g.Served = func(context.Context) (bool, error) { asked.Add(1); return false, errors.New("connection refused") }
	g.Start(t.Context(), time.Second)
	if err := errString(g.Run(t.Context())); !strings.Contains(err, "cannot tell whether the cluster serves resource.k8s.io/v1: connection refused") {
		t.Errorf("Run after a failed discovery = %q", err)
	}
	g.Served = func(context.Context) (bool, error) { asked.Add(1); return served.Load(), nil }
	served.Store(true)
	g.Start(t.Context(), time.Second)
	g.Start(t.Context(), time.Second)
	if err := g.Run(t.Context()); err != nil {
		t.Errorf("Run once served, slices published: %v", err)
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("discovery asked %d times, want 3 (never again once served)", n)
	}
	src.objs = nil
	if err := errString(g.Run(t.Context())); err != "dra: not published for this node yet: gpu.example.com (no ResourceSlice)" {
		t.Errorf("Run with no slice = %q", err)
	}
}

// TestWatchGateWakes: a watched gate wakes the loop when a change makes it
// pass on a node being verified, and only then.
func TestWatchGateWakes(t *testing.T) {
	src := &listSource{objs: []any{csiNode()}}
	g := newCSIDrivers([]string{"ebs.csi.aws.com"}, src)
	h := &wakeHost{verifying: true}
	g.Attach(h)
	g.changed()
	src.objs = []any{csiNode("ebs.csi.aws.com")}
	h.verifying = false
	g.changed()
	if h.wakes.Load() != 0 {
		t.Fatalf("woken %d times: the gate still waited, then the node was verified", h.wakes.Load())
	}
	h.verifying = true
	g.changed()
	if h.wakes.Load() != 1 {
		t.Errorf("woken %d times, want 1 once the driver registered", h.wakes.Load())
	}
}

// TestResourceGateConfigs: each gate is off by default, on by its own
// flag, refuses names that cannot be drivers or resources, and builds.
func TestResourceGateConfigs(t *testing.T) {
	csi, res, dra := &CSIDriversConfig{}, &ExtendedResourcesConfig{}, &DRAConfig{}
	for _, c := range []checks.GateConfig{csi, res, dra} {
		if c.Enabled() {
			t.Errorf("%T on by default", c)
		}
	}
	csi.Drivers, res.Require, dra.Drivers = []string{"ebs.csi.aws.com", "Bad_Driver"}, []string{"nvidia.com/gpu", "a/b/c"}, []string{strings.Repeat("a", 64)}
	for flagName, errs := range map[string][]error{"gate.csidrivers": csi.Validate(true), "gate.extendedresources": res.Validate(true), "gate.dra": dra.Validate(true)} {
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), "--"+flagName+": ") {
			t.Errorf("%s: Validate = %v, want one problem", flagName, errs)
		}
	}
	if g, ok := res.Build(checks.Deps{}).(*ExtendedResources); !ok || len(g.Required) != 2 || g.Required[0] != "nvidia.com/gpu" {
		t.Errorf("extended resources Build = %+v", g)
	}
	if g, ok := csi.Build(checks.Deps{NodeName: "n1"}).(*CSIDrivers); !ok || g.watch == nil || g.watch.selector != "metadata.name=n1" {
		t.Errorf("CSI drivers Build = %+v", g)
	}
	if g, ok := dra.Build(checks.Deps{NodeName: "n1"}).(*DRA); !ok || g.watch == nil || g.watch.selector != "spec.nodeName=n1" {
		t.Errorf("DRA Build = %+v", g)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
