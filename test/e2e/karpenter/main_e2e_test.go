//go:build e2e

// Package karpenter runs the real Karpenter controller (its KWOK cloud
// provider, pinned in test/tools/karpenter) and KWOK against the harness's
// control plane and kube-scheduler, with kube-node-ready's webhook (admission,
// cleanup, remediation; RBAC from the rendered chart) and an agent process
// for every Node Karpenter creates, started as the agent's DaemonSet would
// (harness.RunNodeAgents). Each scenario has a NodePool of its own, picked by
// its pods through a node label, so the scenarios run side by side on one
// Karpenter; the long ones set the package's wall time. A scenario that
// shows something did not happen (no runaway launch) holds until Karpenter
// and the agents ran a number of rounds, counted from their metrics, not
// for a duration. Timings are logged as `figure:` lines (docs/benchmarks.md).
package karpenter

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// scenarioParallelism is how many scenarios run at once unless -parallel
// says otherwise: all of them. The default (GOMAXPROCS, 2 on the CI
// machine) would run them two by two, and the package's wall time would be
// their sum instead of the longest one's; they mostly wait.
const scenarioParallelism = "8"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		if err := flag.Set("test.parallel", scenarioParallelism); err != nil {
			panic(err)
		}
	}
	harness.Main(m)
}

const (
	ns = harness.AgentNamespace
	// ipA is the webhook: admission, cleanup and remediation of the
	// agent's default keys.
	ipA = "10.213.0.20"
	// ipB is the replacer (startReplacer).
	ipB = "10.213.0.21"
	// unreachable is an address nothing listens on: an agent whose only
	// check probes it never verifies.
	unreachable = "10.213.0.99:9"
	// hookAddr receives the cleanup hook plugin's POSTs.
	hookAddr = "10.213.0.30:9000"
	// poolLabel is the node label a scenario's pods select their NodePool
	// by (nodeSelector), one value per pool.
	poolLabel = "knr-e2e/pool"
	// failCleanupLabel marks the nodes whose cleanup hook the receiver
	// refuses (HTTP 500): a failing critical plugin.
	failCleanupLabel = "knr-e2e/cleanup"
	// deadline is the webhook's --unverified-deadline.
	deadline = 20 * time.Second
	// cleanupDeadline is the webhook's --cleanup-deadline.
	cleanupDeadline = 15 * time.Second
)

// env is what every scenario shares: one control plane with kube-scheduler,
// KWOK and Karpenter (NodeRepair on), and the webhooks.
type env struct {
	cp   *harness.ControlPlane
	dyn  dynamic.Interface
	karp *harness.Karpenter
	w    *harness.Daemon
	wb   *harness.Daemon
	hook *hookReceiver
}

// TestKarpenter brings up the environment once and runs the scenarios on
// it, in parallel but for Replace, which runs after them.
func TestKarpenter(t *testing.T) {
	e := newEnv(t, harness.Options{})
	t.Run("scenarios", func(t *testing.T) {
		t.Run("NoRunaway", func(t *testing.T) { t.Parallel(); e.testNoRunaway(t) })
		t.Run("ScaleUp", func(t *testing.T) { t.Parallel(); e.testScaleUp(t) })
		t.Run("MisconfiguredKeys", func(t *testing.T) { t.Parallel(); e.testMisconfiguredKeys(t) })
		t.Run("ReadinessKeyAtRegistration", func(t *testing.T) { t.Parallel(); e.testReadinessKeyAtRegistration(t) })
		t.Run("DeleteNodeClaim", func(t *testing.T) { t.Parallel(); e.testDeleteNodeClaim(t) })
		t.Run("DeleteHeld", func(t *testing.T) { t.Parallel(); e.testDeleteHeld(t) })
		t.Run("Repair", func(t *testing.T) { t.Parallel(); e.testRepair(t) })
	})
	// The replacer counts, in its circuit breaker, every new node carrying
	// one of the project's keys (the previous keys of every preset
	// included), so it starts once the other scenarios' pools are gone.
	t.Run("Replace", func(t *testing.T) { e.startReplacer(t); e.testReplace(t) })
}

// newEnv starts the environment on a control plane of opts.
func newEnv(t *testing.T, opts harness.Options) *env {
	t.Helper()
	start := time.Now()
	cp := harness.StartT(t, opts)
	if err := cp.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.StartKWOK(harness.KWOKOptions{}); err != nil {
		t.Fatal(err)
	}
	karp, err := cp.StartKarpenter(t.Context(), harness.KarpenterOptions{FeatureGates: "NodeRepair=true"})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cp: cp, dyn: dyn, karp: karp, hook: &hookReceiver{}}
	harness.ServeHTTP(t, hookAddr, e.hook)
	if err := cp.ApplyChartRBAC(t.Context(), ns, "webhook.remediation.policy=replace"); err != nil {
		t.Fatal(err)
	}
	e.startWebhook(t)
	t.Logf("figure: environment (control plane, kube-scheduler, KWOK, Karpenter, webhook) up in %s", time.Since(start).Round(100*time.Millisecond))
	return e
}

// startWebhook runs the webhook with admission (our finalizer on every new
// Node), cleanup (a critical hook plugin and the log plugin, bounded by
// --cleanup-deadline) and remediation `replace` of the default keys with
// its circuit breaker off (the protected pools of the no-runaway and
// mis-configured scenarios never verify, and would open it for everyone).
func (e *env) startWebhook(t *testing.T) {
	t.Helper()
	cp := e.cp
	kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(t.Context(),
		harness.WebhookConfig(harness.WebhookConfigName, "https://"+ipA+":8443/mutate-node", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(cp.Dir, "cleanup.yaml")
	cfg := fmt.Sprintf("plugins:\n  hook:\n    critical: true\n    timeout: 5s\n    url: http://%s/node-deleted\n    retries: 0\n  log: {}\n", hookAddr)
	if err := os.WriteFile(config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	e.w = cp.StartWebhook(t, "webhook", ipA,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=webhook",
		"--webhook-config-name="+harness.WebhookConfigName, "--extra-sans="+ipA,
		"--config="+config, "--cleanup-retry-base=500ms", "--cleanup-retry-max=2s",
		"--cleanup-deadline="+cleanupDeadline.String(), "--cleanup-deadline-min-attempts=2",
		"--remediation=replace", "--unverified-deadline="+deadline.String(), "--remediation-interval=1s",
		// testRepair's node verified once: replaced only through its NodeClaim,
		// which Karpenter drains; with a fleet budget of 2, as its agents', so
		// that its own re-taint does not use the budget up (with 1 it would:
		// the small-cluster rule of docs/remediation.md).
		"--remediation-replace-retainted", "--agent-fleet-budget=2",
		"--remediation-breaker-threshold=off", "--log-level=debug")
	e.w.WaitReady(t, 30*time.Second)
	// Admission answers once the webhook wrote the caBundle.
	harness.WaitFor(t, 30*time.Second, "a new Node gets our finalizer from admission", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		if err != nil {
			return false
		}
		cp.RemoveNode(t, n.Name)
		return slices.Contains(n.Finalizers, harness.Finalizer)
	})
}

// The replacer: a second webhook identity, the chart rendered with
// fullnameOverride=replacerName (its own ServiceAccount, RBAC, Lease and
// certificate Secret), that does nothing but remediation `replace` of the
// nodes carrying replaceTaint, with its circuit breaker on. Its keys are
// the replace pool's alone, so its breaker counts only that pool's nodes.
const replacerName = "knr-replacer"

// replaceTaint is the replace pool's startup taint, the replacer's
// --agent-startup-taint.
var replaceTaint = corev1.Taint{Key: "knr-e2e.example/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// Its deadline and breaker: the breaker opens when 3 of the latest 6 new
// nodes went past the deadline unverified, so two nodes are replaced and
// the third is kept.
const (
	replaceDeadline = 15 * time.Second
	breakerWindow   = 6
	breakerOpensAt  = 3
)

func (e *env) startReplacer(t *testing.T) {
	t.Helper()
	cp := e.cp
	if err := cp.ApplyChartRBAC(t.Context(), ns, "fullnameOverride="+replacerName, "webhook.remediation.policy=replace"); err != nil {
		t.Fatal(err)
	}
	name := replacerName + "-webhook"
	kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	e.wb = cp.StartWebhook(t, "replacer", ipB,
		"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=replacer",
		"--webhook-config-name=", "--cert-secret="+name+"-certs", "--leader-elect-lease-name="+name,
		"--extra-sans="+ipB, "--cleanup=false", "--backfill=false",
		"--remediation=replace", "--unverified-deadline="+replaceDeadline.String(), "--remediation-interval=1s",
		"--agent-startup-taint="+replaceTaint.ToString(), "--agent-unhealthy-taint=knr-e2e.example/unhealthy=true:NoSchedule",
		fmt.Sprintf("--remediation-breaker-window=%d", breakerWindow), "--remediation-breaker-threshold=50%",
		// The agents' fleet budget counts re-tainted nodes cluster-wide: the
		// repair scenario's one would otherwise hold the replace pool's
		// replacements for as long as it lasts.
		"--agent-fleet-budget=50%",
		"--log-level=debug")
	e.wb.WaitReady(t, 30*time.Second)
}

// hookReceiver answers the cleanup hook plugin: HTTP 500 for a node
// labelled failCleanupLabel=fail (a failing critical plugin), else 200; it
// records when each node's first and latest POST came.
type hookReceiver struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var doc plugins.HookDocument
	if err := json.NewDecoder(r.Body).Decode(&doc); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	if h.calls == nil {
		h.calls = map[string][]time.Time{}
	}
	h.calls[doc.Node.Name] = append(h.calls[doc.Node.Name], time.Now())
	h.mu.Unlock()
	if doc.Node.Labels[failCleanupLabel] == "fail" {
		http.Error(w, "refused by the test", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// callsFor are the times of the hook's POSTs about node.
func (h *hookReceiver) callsFor(node string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls[node])
}
