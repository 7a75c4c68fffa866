package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	evanphx "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// ready is n with its Ready condition status and reason, the kubelet's last
// heartbeat at hb.
func ready(n *corev1.Node, status corev1.ConditionStatus, reason string, hb time.Time) *corev1.Node {
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason, LastHeartbeatTime: metav1.NewTime(hb)}}
	return n
}

// deletedNode is a node being deleted, its kubelet last heard at t0.
func deletedOOSNode(status corev1.ConditionStatus, reason string) *corev1.Node {
	n := deleting(node("n1"))
	n.UID = "uid-1"
	n.ResourceVersion = "7"
	return ready(n, status, reason, t0)
}

func TestKubeletSilent(t *testing.T) {
	tests := []struct {
		name   string
		node   *corev1.Node
		silent bool
	}{
		{"Ready True is the kubelet's", ready(node("n"), corev1.ConditionTrue, "KubeletReady", t0), false},
		{"Ready False for the kubelet's own reason", ready(node("n"), corev1.ConditionFalse, "KubeletNotReady", t0), false},
		{"Ready Unknown is the controller's", ready(node("n"), corev1.ConditionUnknown, "NodeStatusUnknown", t0), true},
		{"Ready False NodeStatusUnknown", ready(node("n"), corev1.ConditionFalse, "NodeStatusUnknown", t0), true},
		{"no Ready condition: not known to be gone", node("n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := kubeletSilent(tt.node); got != tt.silent {
				t.Errorf("kubeletSilent = %v, want %v", got, tt.silent)
			}
		})
	}
}

// The grace is counted on the webhook's clock from the first read that
// showed the kubelet silent, and starts again whenever the kubelet answered
// in between: its own Ready, or a new heartbeat.
func TestSilenceCountsOnTheWebhooksClock(t *testing.T) {
	const grace = 30 * time.Second
	unknown := func(hb time.Time) *corev1.Node {
		return ready(node("n"), corev1.ConditionUnknown, "NodeStatusUnknown", hb)
	}
	type read struct {
		at   time.Duration
		node *corev1.Node
		want bool
	}
	tests := []struct {
		name  string
		reads []read
	}{
		{"silent for the grace", []read{{0, unknown(t0), false}, {29 * time.Second, unknown(t0), false}, {30 * time.Second, unknown(t0), true}}},
		// The heartbeat is the kubelet's clock: an old one does not shorten the grace.
		{"an old heartbeat does not count", []read{{0, unknown(t0.Add(-time.Hour)), false}, {10 * time.Second, unknown(t0.Add(-time.Hour)), false}}},
		{"a new heartbeat starts again", []read{{0, unknown(t0), false}, {20 * time.Second, unknown(t0.Add(15 * time.Second)), false}, {40 * time.Second, unknown(t0.Add(15 * time.Second)), false}, {50 * time.Second, unknown(t0.Add(15 * time.Second)), true}}},
		{"the kubelet's Ready starts again", []read{{0, unknown(t0), false}, {20 * time.Second, ready(node("n"), corev1.ConditionTrue, "KubeletReady", t0), false}, {25 * time.Second, unknown(t0), false}, {50 * time.Second, unknown(t0), false}, {55 * time.Second, unknown(t0), true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s silence
			for _, r := range tt.reads {
				if got := s.observe(t0.Add(r.at), r.node, grace); got != r.want {
					t.Errorf("at %s: gone = %v, want %v", r.at, got, r.want)
				}
			}
		})
	}
}

// The patch adds the taint to exactly the version judged: it fails on
// another resourceVersion or UID, and keeps every other taint.
func TestOutOfServicePatch(t *testing.T) {
	n := deletedOOSNode(corev1.ConditionUnknown, "NodeStatusUnknown")
	for _, taints := range [][]corev1.Taint{nil, {{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}}} {
		n.Spec.Taints = taints
		patch, err := OutOfServicePatch(n)
		if err != nil {
			t.Fatal(err)
		}
		p, err := evanphx.DecodePatch(patch)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := json.Marshal(n)
		out, err := p.Apply(doc)
		if err != nil {
			t.Fatalf("patch %s on the version judged: %v", patch, err)
		}
		var got corev1.Node
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.Taints) != len(taints)+1 || !got.Spec.Taints[len(taints)].MatchTaint(&OutOfServiceTaint) || got.Spec.Taints[len(taints)].Value != "nodeshutdown" {
			t.Errorf("taints after the patch = %v, want %v and %s", got.Spec.Taints, taints, OutOfServiceTaint.ToString())
		}
		for _, change := range []func(*corev1.Node){
			func(c *corev1.Node) { c.ResourceVersion = "8" },
			func(c *corev1.Node) { c.UID = "uid-2" },
		} {
			c := n.DeepCopy()
			change(c)
			doc, _ := json.Marshal(c)
			if _, err := p.Apply(doc); err == nil {
				t.Errorf("patch %s applied to another version of the node (uid %s, resourceVersion %s)", patch, c.UID, c.ResourceVersion)
			}
		}
	}
}

// oosRun runs the plugin for judged against a fake API server holding n, on a
// fake clock stepped by the poll interval whenever the plugin waits;
// script changes the node before the read at each elapsed time (rounded to
// the poll). It returns the patches the plugin sent and its error.
func oosRun(t *testing.T, n, judged *corev1.Node, dryRun bool, script func(elapsed time.Duration, n *corev1.Node), reactors ...core.ReactionFunc) ([]string, error) {
	t.Helper()
	client := fake.NewClientset(n)
	patches := recordPatches(client, reactors)
	clk := clocktesting.NewFakeClock(t0)
	p := &outOfService{client: client, clock: clk, grace: 30 * time.Second, wait: 2 * time.Minute, poll: 2 * time.Second, log: quiet}
	ctx, cancel := context.WithTimeout(cleanup.WithRunInfo(t.Context(), cleanup.RunInfo{DryRun: dryRun, Attempt: 1}), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Cleanup(ctx, judged.DeepCopy()) }()
	for {
		select {
		case err := <-done:
			return *patches, err
		case <-ctx.Done():
			t.Fatal("the plugin did not return")
		default:
		}
		if !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
			continue
		}
		// The plugin waits: change the node as the next read will see it.
		if script != nil {
			cur, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err == nil {
				script(clk.Since(t0)+p.poll, cur)
				if _, err := client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		clk.Step(p.poll)
	}
}

// Each gate of the out-of-service taint, seen in what the plugin sends: a
// node is tainted only while it is being deleted, is the same incarnation,
// and its kubelet has been silent for the grace on fresh reads; a kubelet
// that answers, or comes back, is never tainted, and the attempt ends in a
// Skip that holds nothing.
func TestOutOfServiceTaintsOnlyAGoneKubelet(t *testing.T) {
	unknown := deletedOOSNode(corev1.ConditionUnknown, "NodeStatusUnknown")
	answering := deletedOOSNode(corev1.ConditionTrue, "KubeletReady")
	notDeleting := unknown.DeepCopy()
	notDeleting.DeletionTimestamp = nil
	tainted := unknown.DeepCopy()
	tainted.Spec.Taints = []corev1.Taint{OutOfServiceTaint}
	heartbeatEvery := func(d time.Duration) func(time.Duration, *corev1.Node) {
		return func(e time.Duration, n *corev1.Node) {
			if e%d == 0 {
				n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(t0.Add(e))
			}
		}
	}
	comesBack := func(e time.Duration, n *corev1.Node) {
		if e >= 20*time.Second {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionTrue, "KubeletReady"
		}
	}
	goesAway := func(e time.Duration, n *corev1.Node) {
		if e >= 40*time.Second {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
		}
	}
	tests := []struct {
		name      string
		node      *corev1.Node
		stored    *corev1.Node // the Node the API server holds, when not node
		script    func(time.Duration, *corev1.Node)
		dryRun    bool
		reactors  []core.ReactionFunc
		wantTaint int
		wantSkip  string
	}{
		{name: "kubelet gone past the grace", node: unknown, wantTaint: 1},
		{name: "False for NodeStatusUnknown counts as gone", node: deletedOOSNode(corev1.ConditionFalse, "NodeStatusUnknown"), wantTaint: 1},
		{name: "the kubelet goes while the plugin waits", node: answering, script: goesAway, wantTaint: 1},
		{name: "kubelet answers", node: answering, wantSkip: "still answers"},
		{name: "kubelet comes back within the grace", node: unknown, script: comesBack, wantSkip: "still answers"},
		{name: "heartbeats keep coming", node: unknown, script: heartbeatEvery(20 * time.Second), wantSkip: "silent for 0s only, less than the grace 30s"},
		{name: "not being deleted", node: notDeleting, wantSkip: "is not being deleted"},
		{name: "already tainted: nothing sent", node: tainted},
		{name: "dry run sends nothing", node: unknown, dryRun: true},
		{
			name: "re-created under the same name", node: unknown,
			stored:   func() *corev1.Node { n := unknown.DeepCopy(); n.UID = "uid-2"; return n }(),
			wantSkip: "re-created under the same name",
		},
		{
			name: "changed under the patch: judged again on a fresh read", node: unknown, wantTaint: 2,
			reactors: []core.ReactionFunc{func() core.ReactionFunc {
				first := true
				return func(core.Action) (bool, runtime.Object, error) {
					if first {
						first = false
						return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "n1", nil)
					}
					return false, nil, nil
				}
			}()},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored := tt.node
			if tt.stored != nil {
				stored = tt.stored
			}
			patches, err := oosRun(t, stored, tt.node, tt.dryRun, tt.script, tt.reactors...)
			var skip *cleanup.Skip
			switch {
			case tt.wantSkip != "" && (!errors.As(err, &skip) || !strings.Contains(skip.Reason, tt.wantSkip)):
				t.Errorf("Cleanup = %v, want a skip saying %q", err, tt.wantSkip)
			case tt.wantSkip == "" && err != nil:
				t.Errorf("Cleanup = %v, want nil", err)
			}
			if len(patches) != tt.wantTaint {
				t.Fatalf("patches sent = %q, want %d", patches, tt.wantTaint)
			}
			for _, p := range patches {
				if !strings.Contains(p, `{"op":"test","path":"/metadata/uid","value":"uid-1"}`) || !strings.Contains(p, `"path":"/metadata/resourceVersion"`) || !strings.Contains(p, `"key":"node.kubernetes.io/out-of-service","value":"nodeshutdown","effect":"NoExecute"`) {
					t.Errorf("patch %s: want the taint guarded by the UID and resourceVersion judged", p)
				}
			}
		})
	}
}

// recordPatches records every node patch sent, before reactors (which may
// answer it) see it.
func recordPatches(client *fake.Clientset, reactors []core.ReactionFunc) *[]string {
	var patches []string
	for _, r := range reactors {
		client.PrependReactor("patch", "nodes", r)
	}
	client.PrependReactor("patch", "nodes", func(a core.Action) (bool, runtime.Object, error) {
		patches = append(patches, string(a.(core.PatchAction).GetPatch()))
		return false, nil, nil
	})
	return &patches
}

// A node already gone needs nothing; settings errors name the key.
func TestOutOfServiceSettings(t *testing.T) {
	p := &outOfService{client: fake.NewClientset(), clock: clocktesting.NewFakeClock(t0), grace: time.Second, wait: time.Second, poll: time.Second, log: quiet}
	if err := p.Cleanup(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: types.UID("u")}}); err != nil {
		t.Errorf("a node already gone: %v, want nil", err)
	}
	for settings, want := range map[string]string{
		`{"grace":"0s"}`:         "out-of-service.grace: want a duration of at least 1s",
		`{"wait":"soon"}`:        "out-of-service.wait:",
		`{"pollInterval":"1ms"}`: "out-of-service.pollInterval:",
		`{"graceSeconds":"30s"}`: "out-of-service.graceSeconds: unknown key",
	} {
		if _, err := newOutOfService(cleanup.Deps{Client: fake.NewClientset(), Log: quiet}, json.RawMessage(settings)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("settings %s: %v, want an error saying %q", settings, err, want)
		}
	}
	if _, err := newOutOfService(cleanup.Deps{Client: fake.NewClientset(), Log: quiet}, json.RawMessage(`{"grace":"1m","wait":"3m"}`)); err != nil {
		t.Errorf("valid settings: %v", err)
	}
}

// Once tainted, the node is held until kube-controller-manager has detached
// its volumes: released at once, the Node (and the taint with it) would be
// gone before the controller acted on it. The plugin returns when the
// node's VolumeAttachment goes, and not before.
func TestOutOfServiceHoldsTheNodeUntilItsVolumesAreDetached(t *testing.T) {
	n := deletedOOSNode(corev1.ConditionUnknown, "NodeStatusUnknown")
	va := attachment("va-1", n.Name, time.Now().Add(-time.Hour))
	client := fake.NewClientset(n, va)
	inf := cleanup.NewInformers(client)
	t.Cleanup(inf.Stop)
	attached, err := inf.VolumeAttachments()
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(t0)
	p := &outOfService{client: client, informers: inf, attached: attached, clock: clk, grace: 30 * time.Second, wait: 2 * time.Minute, poll: 2 * time.Second, log: quiet}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Cleanup(ctx, n.DeepCopy()) }()
	tainted := func() bool {
		cur, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && hasOutOfServiceTaint(cur)
	}
	// Drive the clock until the taint is on, then for as long again.
	steps := 0
	for steps < 60 {
		select {
		case err := <-done:
			t.Fatalf("Cleanup returned %v while the node's VolumeAttachment is still there (tainted: %v)", err, tainted())
		case <-ctx.Done():
			t.Fatal("the plugin never waited")
		default:
		}
		if !clk.HasWaiters() {
			time.Sleep(time.Millisecond)
			continue
		}
		clk.Step(p.poll)
		if tainted() {
			steps++
		}
	}
	if err := client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Cleanup after the detach = %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("the plugin did not see the VolumeAttachment go")
	}
}
