//go:build e2e

package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	webhookIP = "10.213.0.60"
	hookAddr  = "10.213.0.61:8080"
)

// hookReceiver answers the webhook's hook plugin: 500 for the nodes in
// fail, 200 for the others, and records what it answered.
type hookReceiver struct {
	fail    map[string]bool
	mu      sync.Mutex
	answers map[string][]int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var doc struct {
		Node struct {
			Name string `json:"name"`
		} `json:"node"`
	}
	if err := json.NewDecoder(r.Body).Decode(&doc); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	code := http.StatusOK
	if h.fail[doc.Node.Name] {
		code = http.StatusInternalServerError
	}
	h.mu.Lock()
	h.answers[doc.Node.Name] = append(h.answers[doc.Node.Name], code)
	h.mu.Unlock()
	w.WriteHeader(code)
}

func (h *hookReceiver) answered(node string) []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.answers[node])
}

// deleteNode deletes the node; its finalizer keeps it, deletionTimestamp set.
func deleteNode(t *testing.T, name string) {
	t.Helper()
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, name, 5*time.Second, "deletion timestamp", func(n *corev1.Node) bool { return n.DeletionTimestamp != nil })
}

func addFinalizer(t *testing.T, name string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, api.Finalizer)
	if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// betweenAttempts reads with read until what it read is not an attempt
// under way (running false), for at most 20 s; read also says what it read.
func betweenAttempts(t *testing.T, read func() (got string, running bool)) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, "a read between two cleanup attempts", func() (bool, string) {
		got, running := read()
		return !running, got
	})
}

// TestCleanupWithTheRealWebhook: the real webhook cleans up a deleted node
// whose critical hook plugin keeps failing; cleanup status and status show
// what its status annotation says; cleanup skip answered "n" leaves the node
// held, with --yes the webhook lets it go.
func TestCleanupWithTheRealWebhook(t *testing.T) {
	rcv := &hookReceiver{fail: map[string]bool{"kp-stuck": true}, answers: map[string][]int{}}
	ln, err := net.Listen("tcp", hookAddr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	const name = "kp-stuck"
	cp.NewNode(t, name, harness.NodeOptions{})
	config := filepath.Join(t.TempDir(), "cleanup.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("plugins:\n  hook:\n    critical: true\n    url: http://%s/nodes\n    retries: 0\n", hookAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	identity, err := cp.ServiceAccountKubeconfig(t.Context(), harness.AgentNamespace, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	w := cp.StartWebhook(t, "kp-webhook", webhookIP,
		"--kubeconfig="+identity, "--namespace="+harness.AgentNamespace, "--pod-name=kp-webhook",
		"--webhook-config-name=", "--extra-sans="+webhookIP, "--config="+config,
		"--cleanup-retry-base=500ms", "--cleanup-retry-max=2s", "--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	// The webhook back-fills its finalizer (no admission webhook configured here).
	cp.WaitNode(t, name, 30*time.Second, "the finalizer back-filled", func(n *corev1.Node) bool {
		return slices.Contains(n.Finalizers, api.Finalizer)
	})
	deleteNode(t, name)
	var status *api.CleanupStatus
	cp.WaitNode(t, name, 30*time.Second, "a second failed attempt in the status annotation", func(n *corev1.Node) bool {
		s, err := api.ParseCleanupStatus(n.Annotations[api.CleanupStatusAnnotation])
		status = s
		return err == nil && s.Attempt >= 2 && strings.HasPrefix(s.Plugins["hook"], "failed: ")
	})

	// Each read renders the annotation as it is at that moment: between two
	// attempts the hook is failed, during one it is running (the webhook
	// marks a retry's plugins running as it starts). A read that meets an
	// attempt under way, more likely on a busy machine, is made again; what
	// it must show of a failed attempt does not change.
	t.Run("cleanup status", func(t *testing.T) {
		// One line per plugin: the hook, and log (always enabled) done.
		var rows []map[string]string
		betweenAttempts(t, func() (string, bool) {
			rows = rowsOf(table(t, plugin(t, "cleanup", "status").stdout), name)
			return fmt.Sprint(rows), slices.ContainsFunc(rows, func(r map[string]string) bool { return r["STATE"] == string(api.PluginRunning) })
		})
		if len(rows) != 2 || rows[0]["PLUGIN"] != "hook" || rows[1]["PLUGIN"] != "log" || rows[1]["STATE"] != "done" {
			t.Fatalf("cleanup status rows of %s: %v, want the failed hook first, then log done", name, rows)
		}
		r := rows[0]
		var attempt int
		if _, err := fmt.Sscan(r["ATTEMPT"], &attempt); err != nil || attempt < status.Attempt ||
			!strings.HasPrefix(r["STATE"], "failed: hook: ") || !strings.HasSuffix(r["STATE"], "HTTP 500") || r["DELETING"] == "-" || r["RETRY-IN"] == "-" {
			t.Errorf("row %v: want the hook failed with HTTP 500 at attempt >= %d, a deletion age and a retry", r, status.Attempt)
		}
	})
	t.Run("status", func(t *testing.T) {
		var rows []map[string]string
		betweenAttempts(t, func() (string, bool) {
			rows = rowsOf(table(t, plugin(t, "status").stdout), name)
			return fmt.Sprint(rows), len(rows) == 1 && strings.Contains(rows[0]["CLEANUP"], " running")
		})
		if len(rows) != 1 || !strings.HasPrefix(rows[0]["CLEANUP"], "deleting: attempt ") || !strings.HasSuffix(rows[0]["CLEANUP"], ", 1 failed") {
			t.Errorf("status rows %v: want CLEANUP deleting: attempt N, 1 failed", rows)
		}
	})
	t.Run("cleanup status -o json", func(t *testing.T) {
		var c kubectlplugin.Cleanup
		var n *corev1.Node
		betweenAttempts(t, func() (string, bool) {
			var l kubectlplugin.List
			if err := json.Unmarshal([]byte(plugin(t, "cleanup", "status", "-o", "json").stdout), &l); err != nil {
				t.Fatal(err)
			}
			n = cp.GetNode(t, name)
			i := slices.IndexFunc(l.Items, func(r kubectlplugin.NodeReport) bool { return r.Name == name })
			if i < 0 {
				t.Fatalf("%s not in %+v", name, l.Items)
			}
			c = l.Items[i].Cleanup
			running := c.Status != nil && slices.Contains(slices.Collect(maps.Values(c.Status.Plugins)), string(api.PluginRunning))
			return fmt.Sprintf("%+v (status %+v)", c, c.Status), running
		})
		if c.State != kubectlplugin.CleanupDeleting || c.DeletionTimestamp == nil || !c.DeletionTimestamp.Equal(n.DeletionTimestamp) ||
			c.Status == nil || c.Status.Attempt < status.Attempt || !strings.HasPrefix(c.Status.Plugins["hook"], "failed: ") || c.Status.RetryIn == "" {
			t.Errorf("cleanup %+v (status %+v), server deletion %v", c, c.Status, n.DeletionTimestamp)
		}
	})

	// Answered "n": untouched, and the webhook keeps holding the node.
	r := kubectl(t, "n\n", nil, "node-ready", "cleanup", "skip", name)
	if r.code != 1 || !strings.Contains(r.stderr, "Node kp-stuck: cleanup deleting: attempt ") || !strings.Contains(r.stderr, "Skip cleanup of node kp-stuck? [y/N] ") ||
		!strings.Contains(r.stderr, "cleanup skip cancelled: node kp-stuck unchanged") {
		t.Errorf("cleanup skip answered n: %s", r)
	}
	attempts := status.Attempt
	cp.WaitNode(t, name, 15*time.Second, "another failed attempt after the n", func(n *corev1.Node) bool {
		s, err := api.ParseCleanupStatus(n.Annotations[api.CleanupStatusAnnotation])
		return err == nil && s.Attempt > attempts
	})
	if n := cp.GetNode(t, name); n.Annotations[api.SkipCleanupAnnotation] != "" || !slices.Contains(n.Finalizers, api.Finalizer) {
		t.Fatalf("after n: annotations %v finalizers %v; want no skip and the finalizer kept", n.Annotations, n.Finalizers)
	}

	// --yes: the annotation, and the webhook lets the node go.
	r = plugin(t, "cleanup", "skip", name, "--yes")
	if !strings.HasPrefix(r.stdout, "node/kp-stuck annotated infra.894.io/skip-cleanup=true") || strings.Contains(r.stderr, "[y/N]") {
		t.Errorf("cleanup skip --yes: %s", r)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("node %s still there 20 s after cleanup skip --yes", name)
	}
	cp.WaitEvent(t, 15*time.Second, "Node", name, api.EventCleanupSkipped, "")
	for _, code := range rcv.answered(name) {
		if code != http.StatusInternalServerError {
			t.Errorf("the hook was answered %d for %s: the cleanup was to fail throughout", code, name)
		}
	}
	if got := rcv.answered(name); len(got) < 3 {
		t.Errorf("%d hook calls for %s, want the failed attempts", len(got), name)
	}
}

// TestCleanupStatusUnreadableAndNotStarted: without a webhook, a deleted
// node whose status annotation is garbled shows as unreadable (not a crash),
// one without an annotation as not started; an empty stdin declines a skip.
func TestCleanupStatusUnreadableAndNotStarted(t *testing.T) {
	cp.NewNode(t, "kp-garbled", harness.NodeOptions{Annotations: map[string]string{api.CleanupStatusAnnotation: `{"attempt":2,"plugins":{"hook":"fai`}})
	cp.NewNode(t, "kp-waiting", harness.NodeOptions{})
	for _, name := range []string{"kp-garbled", "kp-waiting"} {
		addFinalizer(t, name)
		deleteNode(t, name)
	}
	rows := table(t, plugin(t, "cleanup", "status").stdout)
	if got := rowsOf(rows, "kp-garbled"); len(got) != 1 || !strings.HasPrefix(got[0]["STATE"], "unreadable: infra.894.io/cleanup-status: not JSON") {
		t.Errorf("kp-garbled: %v", got)
	}
	if got := rowsOf(rows, "kp-waiting"); len(got) != 1 || !strings.HasPrefix(got[0]["STATE"], "not started: ") {
		t.Errorf("kp-waiting: %v", got)
	}
	rows = table(t, plugin(t, "status").stdout)
	for name, want := range map[string]string{"kp-garbled": "deleting: status unreadable", "kp-waiting": "deleting: not started"} {
		if got := rowsOf(rows, name); len(got) != 1 || got[0]["CLEANUP"] != want {
			t.Errorf("%s: status rows %v, want CLEANUP %q", name, got, want)
		}
	}
	var l kubectlplugin.List
	if err := json.Unmarshal([]byte(plugin(t, "cleanup", "status", "-o", "json").stdout), &l); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(l.Items, func(r kubectlplugin.NodeReport) bool { return r.Name == "kp-garbled" })
	if i < 0 || l.Items[i].Cleanup.StatusError == "" || l.Items[i].Cleanup.Status != nil {
		t.Errorf("kp-garbled in json: %+v", l.Items)
	}

	r := kubectl(t, "", nil, "node-ready", "cleanup", "skip", "kp-garbled")
	if r.code != 1 || !strings.Contains(r.stderr, "Node kp-garbled: cleanup deleting: status unreadable.") || !strings.Contains(r.stderr, "cancelled") {
		t.Errorf("cleanup skip with an empty stdin: %s", r)
	}
	if n := cp.GetNode(t, "kp-garbled"); n.Annotations[api.SkipCleanupAnnotation] != "" {
		t.Errorf("declined skip set the annotation: %v", n.Annotations)
	}
}
