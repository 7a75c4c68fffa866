package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/jsonpatch"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// OutOfServiceName is the out-of-service plugin's name.
const OutOfServiceName = "out-of-service"

// OutOfServiceTaint is the taint Kubernetes' non-graceful node shutdown
// acts on: kube-controller-manager force-deletes the node's terminating
// pods and detaches their volumes at once instead of after its 6-minute
// force-detach wait. The chart's node-writes policy lets the webhook add
// exactly this taint, and only to a node being deleted whose kubelet is
// silent.
var OutOfServiceTaint = corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// outOfService adds OutOfServiceTaint to a deleted node once its kubelet is
// gone, so its volumes move before the Node object does. A kubelet is gone
// when every fresh read of the node for grace, on the webhook's own clock,
// shows the Ready condition kube-controller-manager writes for a node that
// stopped renewing its Lease (Unknown, or False for NodeStatusUnknown) with
// the kubelet's last heartbeat unchanged. A kubelet that still answers is
// never tainted: the attempt waits for it to go at most wait, then leaves
// the node alone (a cleanup.Skip, which holds nothing).
//
// Once tainted, the plugin waits (within its timeout) until the node's
// VolumeAttachments are gone: kube-controller-manager acts on the taint of
// a Node that exists, so the Node, which the finalizer holds, must outlive
// the detach; released at once, the Node would be gone with the taint and
// the volumes would wait out the 6-minute force-detach timeout all the same.
type outOfService struct {
	client    kubernetes.Interface
	informers *cleanup.Informers
	attached  cache.SharedIndexInformer // nil: do not wait for detaches
	clock     clock.Clock
	grace     time.Duration
	wait      time.Duration
	poll      time.Duration
	log       *slog.Logger
}

type outOfServiceSettings struct {
	// Grace is how long the kubelet must have been silent, as the plugin
	// saw it, before the taint goes on.
	Grace string `json:"grace"`
	// Wait is the longest an attempt waits for the kubelet to go silent and
	// for the grace to pass.
	Wait string `json:"wait"`
	// PollInterval is the time between fresh reads of the node.
	PollInterval string `json:"pollInterval"`
}

// Defaults of the out-of-service plugin: kube-controller-manager marks a
// node Unknown after 50 s without a Lease renewal (its
// --node-monitor-grace-period), so a kubelet silent for grace after that
// missed about eight renewals (every 10 s); a kubelet that restarts posts
// Ready again within seconds. wait covers a node deleted while its machine
// shuts down: 50 s to Unknown and the grace, with room.
const (
	defaultOutOfServiceGrace = 30 * time.Second
	defaultOutOfServiceWait  = 2 * time.Minute
	defaultOutOfServicePoll  = 2 * time.Second
)

func newOutOfService(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	s := outOfServiceSettings{Grace: defaultOutOfServiceGrace.String(), Wait: defaultOutOfServiceWait.String(), PollInterval: defaultOutOfServicePoll.String()}
	if err := cleanup.DecodeSettings(OutOfServiceName, settings, &s); err != nil {
		return nil, err
	}
	p := &outOfService{client: deps.Client, informers: deps.Informers, clock: clock.RealClock{}, log: deps.Log}
	if deps.Informers != nil {
		inf, err := deps.Informers.VolumeAttachments()
		if err != nil {
			return nil, fmt.Errorf("%s: watch volumeattachments: %w", OutOfServiceName, err)
		}
		p.attached = inf
	}
	for _, f := range []struct {
		key, value string
		into       *time.Duration
		min        time.Duration
	}{
		{"grace", s.Grace, &p.grace, time.Second},
		{"wait", s.Wait, &p.wait, 0},
		{"pollInterval", s.PollInterval, &p.poll, 100 * time.Millisecond},
	} {
		d, err := time.ParseDuration(f.value)
		if err != nil || d < f.min {
			return nil, fmt.Errorf("%s.%s: want a duration of at least %s like 30s, got %q", OutOfServiceName, f.key, f.min, f.value)
		}
		*f.into = d
	}
	return p, nil
}

func (p *outOfService) Name() string { return OutOfServiceName }

func (p *outOfService) ShouldRun(*corev1.Node) bool { return true }

// kubeletSilent reports whether n's Ready condition is the one
// kube-controller-manager writes when the kubelet stopped posting (Unknown,
// or False with reason NodeStatusUnknown), and the kubelet's last heartbeat
// in it. A Ready the kubelet wrote (True, or False for its own reasons)
// means it answers.
func kubeletSilent(n *corev1.Node) (bool, metav1.Time) {
	for _, c := range n.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		silent := c.Status == corev1.ConditionUnknown || c.Status == corev1.ConditionFalse && c.Reason == "NodeStatusUnknown"
		return silent, c.LastHeartbeatTime
	}
	return false, metav1.Time{}
}

// silence follows one node's kubelet across fresh reads: since when it has
// been silent, on the webhook's clock, with the same last heartbeat.
type silence struct {
	since     time.Time
	heartbeat metav1.Time
}

// observe takes one fresh read of the node at now and reports whether its
// kubelet has been silent for at least grace. A Ready the kubelet wrote, or
// a new heartbeat, starts the count again: the kubelet answered in between.
func (s *silence) observe(now time.Time, n *corev1.Node, grace time.Duration) bool {
	silent, hb := kubeletSilent(n)
	if !silent {
		s.since = time.Time{}
		return false
	}
	if s.since.IsZero() || !hb.Equal(&s.heartbeat) {
		s.since, s.heartbeat = now, hb
	}
	return now.Sub(s.since) >= grace
}

func hasOutOfServiceTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == OutOfServiceTaint.Key {
			return true
		}
	}
	return false
}

func (p *outOfService) Cleanup(ctx context.Context, node *corev1.Node) error {
	end := p.clock.Now().Add(p.wait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(end) {
		end = d.Add(-time.Second) // a Skip, not the plugin's timeout
	}
	var s silence
	for {
		cur, err := p.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil // gone: nothing left to taint
		case err != nil:
			return fmt.Errorf("%s: get node %s: %w", OutOfServiceName, node.Name, err)
		case cur.UID != node.UID:
			return &cleanup.Skip{Reason: fmt.Sprintf("node %s was re-created under the same name (uid %s, not %s); not tainted", node.Name, cur.UID, node.UID)}
		case cur.DeletionTimestamp == nil:
			return &cleanup.Skip{Reason: fmt.Sprintf("node %s is not being deleted; not tainted", node.Name)}
		case hasOutOfServiceTaint(cur):
			// An earlier attempt, or Karpenter, put it on.
			return p.detached(ctx, node)
		}
		now := p.clock.Now()
		if s.observe(now, cur, p.grace) {
			done, err := p.taint(ctx, cur)
			if err != nil || done && cleanup.DryRun(ctx) {
				return err
			}
			if done {
				return p.detached(ctx, node)
			}
			continue // the node changed under the patch: judge it again
		}
		if !now.Before(end) {
			return &cleanup.Skip{Reason: p.notGone(cur, &s, now)}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", OutOfServiceName, ctx.Err())
		case <-p.clock.After(p.poll):
		}
	}
}

// detached waits until the VolumeAttachments of node that predate its
// deletion are gone (kube-controller-manager detaches them once it has
// force-deleted the pods), looking again at every change the watch brings
// and every poll, or until ctx ends (an error: the plugin is optional by
// default, so the deletion then goes on as it would without it).
func (p *outOfService) detached(ctx context.Context, node *corev1.Node) error {
	if p.attached == nil {
		return nil
	}
	if err := cleanup.WaitSynced(ctx, "volumeattachments", p.attached); err != nil {
		return err
	}
	for {
		changed := p.informers.Changed(p.attached)
		objs, err := p.attached.GetIndexer().ByIndex(cleanup.VolumeAttachmentsByNode, node.Name)
		if err != nil {
			return fmt.Errorf("%s: read the volumeattachments cache: %w", OutOfServiceName, err)
		}
		var left []string
		for _, obj := range objs {
			if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName == node.Name && createdBeforeDeletion(va, node) {
				left = append(left, va.Name)
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: tainted, but %d volumeattachments still present (%v): %w", OutOfServiceName, len(left), left, ctx.Err())
		case <-changed:
		case <-p.clock.After(p.poll):
		}
	}
}

// notGone says why a node was left untainted when the wait ended.
func (p *outOfService) notGone(n *corev1.Node, s *silence, now time.Time) string {
	if s.since.IsZero() {
		return fmt.Sprintf("the kubelet of node %s still answers (Ready is its own) after %s; not tainted %s", n.Name, p.wait, OutOfServiceTaint.ToString())
	}
	return fmt.Sprintf("the kubelet of node %s was silent for %s only, less than the grace %s, when the wait of %s ended; not tainted %s",
		n.Name, now.Sub(s.since).Round(time.Second), p.grace, p.wait, OutOfServiceTaint.ToString())
}

// taint adds OutOfServiceTaint to n, the version just judged: the patch
// tests its UID and resourceVersion, so a node changed since (its kubelet
// back, say) is not tainted but judged again (false, nil).
func (p *outOfService) taint(ctx context.Context, n *corev1.Node) (bool, error) {
	if cleanup.DryRun(ctx) {
		p.log.Info("dry run: would taint node out of service", "node", n.Name, "taint", OutOfServiceTaint.ToString())
		return true, nil
	}
	patch, err := OutOfServicePatch(n)
	if err != nil {
		return false, err
	}
	_, err = p.client.CoreV1().Nodes().Patch(ctx, n.Name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: api.FieldManagerWebhook})
	switch {
	case err == nil:
		p.log.Info("node tainted out of service: its kubelet is gone", "node", n.Name, "taint", OutOfServiceTaint.ToString(), "grace_seconds", p.grace.Seconds())
		return true, nil
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsInvalid(err) || apierrors.IsConflict(err):
		return false, nil
	}
	return false, fmt.Errorf("%s: taint node %s: %w", OutOfServiceName, n.Name, err)
}

// OutOfServicePatch is the JSON patch that adds OutOfServiceTaint to
// exactly the version n of the node: UID and resourceVersion tested, the
// taint list created whole when the node has none.
func OutOfServicePatch(n *corev1.Node) ([]byte, error) {
	ops := []jsonpatch.Op{
		jsonpatch.Test("/metadata/uid", n.UID),
		jsonpatch.Test("/metadata/resourceVersion", n.ResourceVersion),
	}
	if len(n.Spec.Taints) == 0 {
		ops = append(ops, jsonpatch.Add("/spec/taints", []corev1.Taint{OutOfServiceTaint}))
	} else {
		ops = append(ops, jsonpatch.Add("/spec/taints/-", OutOfServiceTaint))
	}
	return jsonpatch.Marshal(ops...)
}
