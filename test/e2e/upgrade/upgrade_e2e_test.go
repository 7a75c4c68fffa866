//go:build e2e

// Package upgrade installs "the previous release" (its chart and images,
// built by the test from the commit PREVIOUS_RELEASE names) with the real
// helm on real nodes, lets it verify nodes and clean one up, then upgrades to
// the working tree's chart and images and rolls back again, watching
// throughout that no node is re-tainted or loses its verified label (but the
// one node the working tree's agent re-taints on purpose), that every node
// created during a roll gets the finalizer, that a cleanup the roll
// interrupts completes only once its critical plugin was reached, and that
// each release understands what the other wrote: the previous release
// recovers the node the working tree's agent re-taints, and no taint is left
// that kubectl node-ready doctor would name. Last, the previous chart runs
// the working tree's images (the previous chart's flags).
package upgrade

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/app"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release   = "kube-node-ready"
	namespace = "kube-node-ready"

	// The names both releases write: the vocabulary of internal/api, which
	// the previous release must share; both run the default preset's taints.
	finalizer           = api.Finalizer
	verifiedLabel       = api.VerifiedLabel
	statusAnnotation    = api.CleanupStatusAnnotation
	replacingAnnotation = api.ReplacingAnnotation
	conditionType       = api.ConditionType

	agentApp        = "kube-node-ready"
	webhookApp      = "kube-node-ready-webhook"
	webhookName     = "kube-node-ready-webhook"
	webhookReplicas = 2

	// simulatedLabel marks the Node objects the test creates: no kubelet
	// runs them, so no pod of the chart may be scheduled there.
	simulatedLabel = "upgrade-test/simulated"

	// hookAddr is the receiver of the critical hook plugin, in the harness
	// namespace.
	hookAddr = "10.213.0.41:8080"

	// checkPeriod is the agents' period here: two periods after a roll are
	// seconds, not minutes.
	checkPeriod = 2 * time.Second
	// unverifiedDeadline is the remediation deadline (policy replace), so the
	// previous release marks and deletes a node that never verifies and
	// leaves its replacing annotation for the new one to read.
	unverifiedDeadline = 25 * time.Second
)

// The cluster (with both releases' images on its nodes), the previous
// release and the repository root, shared by the test.
var (
	cluster *harness.Cluster
	prev    *harness.Release
	root    string
)

// TestMain builds the previous release (or finds it in bin/releases), then
// starts the cluster with its images beside the working tree's. A cluster
// of real nodes may first have to wait for another process's to stop:
// MainWithCluster allows for that.
func TestMain(m *testing.M) {
	var err error
	if root, err = harness.RepoRoot(); err == nil {
		prev, err = previousRelease()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "upgrade:", err)
		os.Exit(1)
	}
	harness.MainWithCluster(m, harness.ClusterOptions{
		Options:       harness.Options{Logf: log.Printf},
		ProjectImages: true,
		Images:        []string{prev.AgentImage, prev.WebhookImage},
		// Three nodes, so that every agent has a peer on another node while
		// the roll replaces one: the previous release's agent stops
		// answering its peers at SIGTERM (no --shutdown-delay), and with
		// a single peer a new agent that dials it before its EndpointSlice
		// says it is going fails a round and sets its condition False.
		Nodes: 3,
		// The node groups as the previous release had them set up.
		NodeTaints: []corev1.Taint{harness.StartupTaint},
	}, func(_ context.Context, c *harness.Cluster) error {
		cluster = c
		return nil
	})
}

// previousRelease builds the release PREVIOUS_RELEASE names (once: it is
// cached) and says how long that took.
func previousRelease() (*harness.Release, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	commit, err := harness.PreviousReleaseCommit(ctx, root)
	if err != nil {
		return nil, err
	}
	r, err := harness.BuildRelease(ctx, root, "", commit, log.Printf)
	if err != nil {
		return nil, err
	}
	log.Printf("previous release %s (chart and images) ready in %s", commit[:12], time.Since(start).Round(time.Millisecond))
	return r, nil
}

// env is what the steps share.
type env struct {
	c    *harness.Cluster
	rcv  *receiver
	mon  *monitor
	prev *harness.Release

	prevTag, newTag   string
	prevVals, newVals string
	newChart          string

	// Before the upgrade, as the previous release left them.
	caCert     []byte
	conditions map[string]metav1.Time

	// victim is the real node the working tree's agent re-taints.
	victim string
}

// values writes the chart values both releases install with: the images
// of the release, a short check period, the chart's pods only on the real
// nodes, a critical hook plugin aimed at the receiver and remediation that
// replaces a node unverified past a short deadline; agentExtra adds values
// of the agent.
func values(t *testing.T, imageValues func(agent, webhook string) (string, error), agentExtra string) string {
	t.Helper()
	agent := fmt.Sprintf("checkPeriod: %s\nnetwork: {peerRefresh: 10s}\nnodeSelector: {kubernetes.io/os: linux}\n%s", checkPeriod, agentExtra)
	webhook := fmt.Sprintf(`nodeSelector: {kubernetes.io/os: linux}
cleanup:
  plugins:
    log: {}
    hook: {critical: true, url: "http://%s/nodes", retries: 0, timeout: 5s}
remediation: {policy: replace, unverifiedDeadline: %s, interval: 2s}`, hookAddr, unverifiedDeadline)
	v, err := imageValues(agent, webhook)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(v); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// simulated shapes the Node objects the test creates: no kubelet runs them,
// and they start with the previous release's startup taint, as its node
// groups would have them.
func simulated() harness.NodeOptions {
	return harness.NodeOptions{NoStartupTaint: true, ExtraTaints: []corev1.Taint{harness.StartupTaint},
		Labels: map[string]string{simulatedLabel: "true"}}
}

func tagOf(t *testing.T, tarball string) string {
	t.Helper()
	ref, err := harness.ImageRef(tarball)
	if err != nil {
		t.Fatal(err)
	}
	return ref[strings.LastIndex(ref, ":")+1:]
}

// TestUpgradeFromPreviousRelease: previous release installed, verifying
// and cleaning up; helm upgrade to the working tree; helm rollback to the
// previous release; the monitor watches every node throughout.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	begin := time.Now()
	e := &env{c: cluster, prev: prev, rcv: newReceiver(), newChart: filepath.Join(root, "charts", "kube-node-ready")}
	harness.ServeHTTP(t, hookAddr, e.rcv)
	e.prevTag, e.newTag = tagOf(t, prev.AgentImage), tagOf(t, filepath.Join(e.c.BinDir, "images", "kube-node-ready-agent.tar"))
	e.prevVals, e.newVals = values(t, prev.ImageValues, ""), values(t, e.c.LocalImageValues, faultGate)
	e.mon = startMonitor(t.Context(), t, e.c.Client, e.rcv)
	for _, s := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"install-previous", e.installPrevious},
		{"upgrade", e.upgrade},
		{"retaint", e.retaint},
		{"rollback", e.rollback},
		{"roll-forward", e.rollForward},
		{"image-only-upgrade", e.imageOnlyUpgrade},
	} {
		if !t.Run(s.name, s.run) {
			t.Fatalf("step %s failed; later steps build on it", s.name)
		}
	}
	t.Logf("install, upgrade, re-taint, rollback, roll forward and image-only upgrade took %s (the cluster and the previous release are TestMain's)", time.Since(begin).Round(time.Second))
}

func (e *env) helm(t *testing.T, args ...string) {
	t.Helper()
	if _, err := e.c.Helm(t.Context(), args...); err != nil {
		t.Fatal(err)
	}
}

// installPrevious: the previous release verifies the real nodes, cleans up
// a deleted node (its hook reaching the receiver), and replaces a node that
// never verifies, whose cleanup the receiver holds across the upgrade.
func (e *env) installPrevious(t *testing.T) {
	start := time.Now()
	e.helm(t, "install", release, e.prev.Chart, "--namespace", namespace, "--create-namespace", "--values", e.prevVals, "--wait", "--timeout", "3m")
	// No agent runs on it: it stays unverified until remediation replaces it.
	stale := "replaced-by-previous"
	e.rcv.hold(stale)
	if _, err := e.c.CreateNode(t.Context(), stale, simulated()); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "real nodes verified by the previous release", func() (bool, string) { return e.verified(t.Context()) })
	t.Logf("previous release installed and every real node verified in %s", time.Since(start).Round(time.Millisecond))
	e.cleanupCompletes(t, "cleaned-by-previous", e.prevTag)

	var n *corev1.Node
	harness.Eventually(t, unverifiedDeadline+time.Minute, "the never-verified node replaced by the previous release, its cleanup held", func() (bool, string) {
		var err error
		if n, err = e.c.Client.CoreV1().Nodes().Get(t.Context(), stale, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		ok := n.DeletionTimestamp != nil && n.Annotations[replacingAnnotation] != "" && n.Annotations[statusAnnotation] != "" && len(e.rcv.hitsOf(stale)) > 0
		return ok, fmt.Sprintf("deleted %v, annotations %v, receiver hits %d", n.DeletionTimestamp, n.Annotations, len(e.rcv.hitsOf(stale)))
	})
	e.statusReadable(t, n)
	e.recordBeforeUpgrade(t)
	e.mon.check(t, "under the previous release")
}

// verified reports whether every real node is untainted
// and labelled verified.
func (e *env) verified(ctx context.Context) (bool, string) {
	var notYet []string
	for _, rn := range e.c.Nodes {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, rn.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return harness.OurTaint(t.Key) }) || n.Labels[verifiedLabel] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v, label %q)", n.Name, n.Spec.Taints, n.Labels[verifiedLabel]))
		}
	}
	return len(notYet) == 0, "not verified: " + strings.Join(notYet, ", ")
}

// cleanupCompletes creates a node (admission gives it the finalizer at
// once), deletes it, and checks that a webhook pod running tag delivered its
// document before the node went.
func (e *env) cleanupCompletes(t *testing.T, name, tag string) {
	t.Helper()
	ctx := t.Context()
	if _, err := e.c.CreateNode(ctx, name, simulated()); err != nil {
		t.Fatal(err)
	}
	n, err := e.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(n.Finalizers, finalizer) {
		t.Errorf("node %s created under %s: finalizers %v, want %s from admission", name, tag, n.Finalizers, finalizer)
	}
	if err := e.c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.gone(t, name, tag)
}

// gone waits until node is gone and checks that a webhook pod running tag
// delivered its document (the monitor checks it came before the release).
func (e *env) gone(t *testing.T, node, tag string) {
	t.Helper()
	// The webhook tries a failed cleanup again after a backoff that grows to
	// --cleanup-retry-max (the chart leaves the default): the receiver may
	// accept just after a try, so the wait holds one whole delay and a
	// minute for the try. At load 40 the new release's first refused try
	// came late in the backoff, and its next was more than a minute away.
	harness.Eventually(t, app.NewOptions().CleanupRetryMax+time.Minute, "node "+node+" cleaned up and gone", func() (bool, string) {
		_, ok := e.mon.goneAt(node)
		return ok, fmt.Sprintf("receiver hits %+v", e.rcv.hitsOf(node))
	})
	ips := podIPsOn(t, e.c, tag)
	for _, h := range e.rcv.hitsOf(node) {
		if h.accepted && slices.Contains(ips, h.from) {
			return
		}
	}
	t.Errorf("node %s: no document accepted from a webhook pod on %s (%v): hits %+v", node, tag, ips, e.rcv.hitsOf(node))
}

// recordBeforeUpgrade keeps what the previous release wrote that the new
// one must carry on: the CA of the webhook's Secret and each real node's
// condition.
func (e *env) recordBeforeUpgrade(t *testing.T) {
	t.Helper()
	sec, err := e.c.Client.CoreV1().Secrets(namespace).Get(t.Context(), webhookName+"-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the previous release's CA Secret: %v", err)
	}
	if e.caCert = sec.Data["ca.crt"]; len(e.caCert) == 0 {
		t.Fatalf("the previous release's CA Secret holds no ca.crt: keys %v", keys(sec.Data))
	}
	e.conditions = map[string]metav1.Time{}
	for _, rn := range e.c.Nodes {
		cond, err := e.condition(t, rn.Name)
		if err != nil {
			t.Fatal(err)
		}
		e.conditions[rn.Name] = cond.LastTransitionTime
		// kubectl node-ready of this tree reads the previous agent's condition.
		if r := kubectlplugin.RoundOf(cond.Reason, cond.Message); r.Outcome != "passed" {
			t.Errorf("node %s: condition %s %q read as %q, want passed", rn.Name, cond.Reason, cond.Message, r.Outcome)
		}
	}
}

// condition is the agents' condition on node, which must be True.
func (e *env) condition(t *testing.T, node string) (corev1.NodeCondition, error) {
	n, err := e.c.Client.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
	if err != nil {
		return corev1.NodeCondition{}, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == conditionType {
			if c.Status != corev1.ConditionTrue {
				return c, fmt.Errorf("node %s: condition %s is %s (%s: %s)", node, conditionType, c.Status, c.Reason, c.Message)
			}
			return c, nil
		}
	}
	return corev1.NodeCondition{}, fmt.Errorf("node %s has no %s condition", node, conditionType)
}

// leaseHeldBy checks that the webhook's leader Lease is held by a webhook
// pod running tag.
func (e *env) leaseHeldBy(t *testing.T, tag string) {
	t.Helper()
	harness.Eventually(t, time.Minute, "leader Lease held by a webhook pod on "+tag, func() (bool, string) {
		var l *coordinationv1.Lease
		l, err := e.c.Client.CoordinationV1().Leases(namespace).Get(t.Context(), webhookName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, fmt.Sprintf("lease: %v", err)
		}
		pods, _, err := podsOf(t.Context(), e.c, webhookApp, tag)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) && strings.HasPrefix(*l.Spec.HolderIdentity, p.Name) {
				return true, ""
			}
		}
		return false, "holder " + *l.Spec.HolderIdentity
	})
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
