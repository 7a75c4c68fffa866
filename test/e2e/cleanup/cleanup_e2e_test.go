//go:build e2e

package cleanup

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func (e *env) config(extra string) string {
	return fmt.Sprintf(`%splugins:
  volumeattachments:
    critical: true
    timeout: 30s
    pollInterval: 200ms
  local-volumes:
    critical: true
    after: [volumeattachments]
  portworx:
    critical: true
    timeout: 60s
    after: [local-volumes]
    endpoint: http://%s
    tokenFile: %s
  notify:
    critical: false
    timeout: 10s
    urlFile: %s
    retries: 1
  log: {}
`, extra, pxAddr, e.tokenFile, e.urlFile)
}

func TestCleanup(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{cp: cp, dir: cp.Dir, px: newPortworx(), chat: &chat{}}
	harness.ServeHTTP(t, pxAddr, e.px)
	harness.ServeHTTP(t, chatAddr, e.chat)
	e.tokenFile = writeFile(t, e.dir, "px-token", "px-token\n")
	e.urlFile = writeFile(t, e.dir, "chat-url", "http://"+chatAddr+"/hook\n")
	e.configPath = writeFile(t, e.dir, "config.yaml", e.config(""))
	go playProtectionControllers(ctx, cp)

	kubeconfig := webhookIdentity(t, cp)
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		harness.WebhookConfig(mwc, "https://"+net.JoinHostPort(ipA, "8443")+"/mutate-node", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := func(pod string) []string {
		return []string{
			"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=" + pod,
			"--webhook-config-name=" + mwc, "--extra-sans=" + ipA + "," + ipB,
			"--config=" + e.configPath, "--config-reload-interval=200ms",
			"--cleanup-retry-base=200ms", "--cleanup-retry-max=2s",
			"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms",
			"--log-level=debug",
		}
	}
	a := cp.StartWebhook(t, "webhook-a", ipA, args("webhook-a")...)
	a.WaitReady(t, 30*time.Second)
	b := cp.StartWebhook(t, "webhook-b", ipB, args("webhook-b")...)
	b.WaitReady(t, 30*time.Second)
	e.procs = []*harness.Daemon{a, b}
	leader := e.leader(t)
	t.Logf("leader: %s", leader.Name)
	if other := e.other(leader); other.Metric(t, "node_cleanup_leader") != 0 {
		t.Fatalf("both replicas report node_cleanup_leader 1")
	}
	// Admission reaches replica A once the caBundle is in place.
	harness.WaitFor(t, 30*time.Second, "a created node gets the finalizer from admission", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		return err == nil && slices.Contains(n.Finalizers, fin)
	})
	mustCreate(t, ctx, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: optedClass, Annotations: map[string]string{"infra.894.io/cleanup-local-volumes": "true"}}, Provisioner: "kubernetes.io/no-provisioner"})
	mustCreate(t, ctx, cp, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "not-opted"}, Provisioner: "kubernetes.io/no-provisioner"})
	mustCreate(t, ctx, cp, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}})

	t.Run("kubectl delete node runs the plugins in order and the node disappears", func(t *testing.T) {
		const name = "clean-1"
		e.px.set(name, pxOK)
		e.createNode(t, name)
		e.createNode(t, "neighbour")
		va := createVA(t, ctx, cp, "va-clean-1", name)
		otherVA := createVA(t, ctx, cp, "va-neighbour", "neighbour")
		pv, pvc := createLocalPV(t, ctx, cp, "pv-clean-1", name, optedClass, "data-clean-1")
		keepClass, _ := createLocalPV(t, ctx, cp, "pv-clean-1-not-opted", name, "not-opted", "")
		keepNode, _ := createLocalPV(t, ctx, cp, "pv-neighbour", "neighbour", optedClass, "")
		e.px.mu.Lock()
		e.px.onDelete = func(node string) string {
			// What the API server holds when Portworx is asked: the plugins
			// it runs after must be done by now.
			vaLeft := 0
			if v, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{}); err == nil && v.DeletionTimestamp == nil {
				vaLeft++
			}
			pvLeft := 0
			if p, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
				pvLeft++
			}
			return fmt.Sprintf("va=%d pv=%d", vaLeft, pvLeft)
		}
		e.px.mu.Unlock()

		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		e.waitGone(t, name, 60*time.Second)

		calls := e.px.callsFor(name)
		if len(calls) != 1 || calls[0].status != 200 || calls[0].check != "va=0 pv=0" {
			t.Errorf("portworx calls for %s = %+v, want one, after the volumeattachment and the local volume were deleted", name, calls)
		}
		for _, gone := range []func() error{
			func() error {
				_, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
				return err
			},
			func() error {
				_, err := cp.Client.CoreV1().PersistentVolumeClaims("apps").Get(ctx, pvc, metav1.GetOptions{})
				return err
			},
		} {
			harness.WaitFor(t, 10*time.Second, "volumeattachment, local volume and its claim gone", func() bool { return apierrors.IsNotFound(gone()) })
		}
		for _, keep := range []string{keepClass, keepNode} {
			if p, err := cp.Client.CoreV1().PersistentVolumes().Get(ctx, keep, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
				t.Errorf("persistentvolume %s (not opted in, or another node's) was touched: %v", keep, err)
			}
		}
		if v, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, otherVA, metav1.GetOptions{}); err != nil || v.DeletionTimestamp != nil {
			t.Errorf("the neighbour's volumeattachment was touched: %v", err)
		}
		harness.WaitFor(t, 10*time.Second, "the success message", func() bool { return len(e.chat.messagesAbout(name)) >= 2 })
		msgs := e.chat.messagesAbout(name)
		if len(msgs) != 2 || !strings.Contains(msgs[0], "cleanup started") || !strings.Contains(msgs[1], "cleanup completed") {
			t.Errorf("chat messages about %s = %q, want started then completed", name, msgs)
		}
		// The leader's log shows the configured order.
		log := e.leader(t).LogT(t)
		last := -1
		for _, msg := range []string{"volumeattachment deleted", "local persistentvolume released", "node decommissioned from portworx"} {
			i := logLine(log, `"msg":"`+msg+`"`, `"node":"clean-1"`)
			if i < 0 || i < last {
				t.Errorf("log line %q for clean-1 missing or out of order", msg)
			}
			last = i
		}
		e.waitEvent(t, name, api.EventCleanupStarted, "")
		e.waitEvent(t, name, api.EventCleanupCompleted, "")
		if got := e.leader(t).Metric(t, "node_cleanup_operations_total", `plugin="portworx"`, `result="success"`); got < 1 {
			t.Errorf("node_cleanup_operations_total{plugin=portworx,result=success} = %v", got)
		}
	})

	t.Run("a critical plugin failing keeps the node, retries with backoff, completes once fixed", func(t *testing.T) {
		const name = "stuck-1"
		e.px.set(name, pxFail)
		e.createNode(t, name)
		statuses := watchStatus(t, cp, name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		harness.WaitFor(t, 30*time.Second, "three failed portworx calls", func() bool { return len(e.px.callsFor(name)) >= 3 })
		// The receiver counts a call when it answers; the webhook writes the
		// failed attempt's status after it reads that answer. Wait for that
		// write rather than read the node once, mid-attempt.
		n := cp.WaitNode(t, name, 10*time.Second, "a failed attempt's status written", func(n *corev1.Node) bool {
			s, err := api.ParseCleanupStatus(n.Annotations[nodecleanup.StatusAnnotation])
			return err == nil && s.Attempt >= 2 && s.RetryIn != ""
		})
		if n.DeletionTimestamp == nil || !slices.Contains(n.Finalizers, fin) {
			t.Fatalf("node %s after failed cleanups: %+v, want it terminating with the finalizer", name, n.ObjectMeta)
		}
		// The status annotation showed the pipeline moving, then the failure.
		var st struct {
			Attempt int               `json:"attempt"`
			Plugins map[string]string `json:"plugins"`
			RetryIn string            `json:"retryIn"`
		}
		if err := json.Unmarshal([]byte(n.Annotations[nodecleanup.StatusAnnotation]), &st); err != nil {
			t.Fatalf("%s on %s: %v (%q)", nodecleanup.StatusAnnotation, name, err, n.Annotations[nodecleanup.StatusAnnotation])
		}
		if st.Attempt < 2 || st.Plugins["volumeattachments"] != "done" || st.Plugins["local-volumes"] != "done" ||
			!strings.HasPrefix(st.Plugins["portworx"], "failed: ") || !strings.Contains(st.Plugins["portworx"], "HTTP 500") || st.RetryIn == "" {
			t.Errorf("cleanup status after failed attempts = %+v", st)
		}
		// A first attempt that ends within 2 s shows only its end; a retry
		// shows its progress from the start.
		seq := statuses()
		if len(seq) == 0 || !strings.Contains(seq[0], `"attempt":1,`) || !strings.Contains(seq[0], `"portworx":"failed: `) {
			t.Errorf("status sequence %q: want the fast first attempt's failure first, with no progress writes before it", seq)
		}
		running := slices.IndexFunc(seq, func(s string) bool { return strings.Contains(s, `"portworx":"running"`) })
		failed := -1
		if running >= 0 {
			failed = slices.IndexFunc(seq[running:], func(s string) bool { return strings.Contains(s, `"portworx":"failed: `) })
		}
		if running < 0 || failed < 0 {
			t.Errorf("status sequence %q: want a retry showing portworx running, then failed", seq)
		}
		// Repeated failures are one Event series (events.k8s.io aggregates
		// Events that differ only in their note).
		e.waitEvent(t, name, api.EventCleanupFailed, "attempt 1 failed, finalizer kept, retrying in 200ms: portworx: portworx: remove node stuck-1 (id px-stuck-1): HTTP 500")
		harness.WaitFor(t, 10*time.Second, "the CleanupFailed series to count a second failure", func() bool {
			return slices.ContainsFunc(cp.Events(t, "Node", name), func(ev eventsv1.Event) bool {
				return ev.Reason == api.EventCleanupFailed && ev.Series != nil && ev.Series.Count >= 2
			})
		})
		// The delay doubles per failure (200ms base in this test).
		log := e.leader(t).LogT(t)
		for attempt, delay := range map[int]string{1: "0.2", 2: "0.4", 3: "0.8"} {
			if logLine(log, `"msg":"node cleanup failed; finalizer kept"`, `"node":"stuck-1"`, fmt.Sprintf(`"attempt":%d,`, attempt), `"retry_in_seconds":`+delay+`}`) < 0 {
				t.Errorf("no log line for failed attempt %d of stuck-1 with retry_in_seconds %s", attempt, delay)
			}
		}
		if got := e.leader(t).Metric(t, "node_cleanup_operations_total", `plugin="portworx"`, `result="failure"`); got < 3 {
			t.Errorf("node_cleanup_operations_total{plugin=portworx,result=failure} = %v, want ≥ 3", got)
		}
		e.px.set(name, pxOK)
		e.waitGone(t, name, 30*time.Second)
		calls := e.px.callsFor(name)
		if calls[len(calls)-1].status != 200 {
			t.Errorf("node gone but the last portworx call answered %d", calls[len(calls)-1].status)
		}
		e.waitEvent(t, name, api.EventCleanupCompleted, "")
	})

	t.Run("an optional plugin failing does not keep the node", func(t *testing.T) {
		const name = "optional-1"
		e.px.set(name, pxAbsent)
		e.chat.setStatus(http.StatusForbidden)
		defer e.chat.setStatus(http.StatusOK)
		e.createNode(t, name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		e.waitGone(t, name, 30*time.Second)
		e.waitEvent(t, name, api.EventCleanupPluginFailed, "optional plugin notify failed")
		e.waitEvent(t, name, api.EventCleanupCompleted, "notify=failure")
	})

	t.Run("a critical notify plugin holds the node until its start message is delivered", func(t *testing.T) {
		const name = "notify-held-1"
		e.px.set(name, pxAbsent)
		critical := strings.Replace(e.config(""), "notify:\n    critical: false", "notify:\n    critical: true", 1)
		e.applyConfig(t, critical, true)
		defer e.applyConfig(t, e.config(""), true)
		e.chat.setStatus(http.StatusInternalServerError)
		defer e.chat.setStatus(http.StatusOK)
		before := e.leader(t).Metric(t, "node_cleanup_operations_total", `plugin="notify"`, `result="failure"`)
		e.createNode(t, name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		harness.WaitFor(t, 30*time.Second, "three failed notify attempts", func() bool {
			v, err := e.leader(t).TryMetric("node_cleanup_operations_total", `plugin="notify"`, `result="failure"`)
			return err == nil && v >= before+3
		})
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil || !slices.Contains(n.Finalizers, fin) {
			t.Fatalf("node %s while its critical start message is refused: %v %v, want it kept with the finalizer", name, err, n.Finalizers)
		}
		e.chat.setStatus(http.StatusOK)
		e.waitGone(t, name, 30*time.Second)
		if msgs := e.chat.messagesAbout(name); len(msgs) == 0 || !strings.Contains(msgs[0], "cleanup started") {
			t.Errorf("messages about %s: %q, want the start message delivered first", name, msgs)
		}
	})

	t.Run("kubectl annotate skip-cleanup on a node stuck in a hanging plugin deletes it at once", func(t *testing.T) {
		const name = "bypass-1"
		e.px.set(name, pxHang)
		e.createNode(t, name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		waitArrived(t, e.px, name)
		cp.KubectlT(t, "", "annotate", "node", name, skipAnnot+"=true")
		e.waitGone(t, name, 10*time.Second)
		e.waitEvent(t, name, api.EventCleanupSkipped, skipAnnot+"=true")
		if calls := e.px.callsFor(name); len(calls) != 1 || calls[0].status != 0 {
			t.Errorf("portworx calls %+v, want the hanging one abandoned by the bypass", calls)
		}
	})

	t.Run("dry run reports, changes nothing outside, still removes the finalizer", func(t *testing.T) {
		const name = "dry-1"
		e.px.set(name, pxOK)
		e.applyConfig(t, e.config("dryRun: true\n"), true)
		defer e.applyConfig(t, e.config(""), true)
		e.createNode(t, name)
		va := createVA(t, ctx, cp, "va-dry-1", name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		e.waitGone(t, name, 30*time.Second)
		if v, err := cp.Client.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{}); err != nil || v.DeletionTimestamp != nil {
			t.Errorf("dry run deleted the volumeattachment: %v", err)
		}
		if calls := e.px.callsFor(name); len(calls) != 0 {
			t.Errorf("dry run called portworx: %+v", calls)
		}
		e.waitEvent(t, name, api.EventCleanupCompleted, "dry run")
		if logLine(e.leader(t).LogT(t), `"msg":"dry run: would delete volumeattachment"`, `"node":"dry-1"`, `"volumeattachment":"va-dry-1"`) < 0 {
			t.Errorf("no dry-run report for the volumeattachment in the leader's log")
		}
	})

	t.Run("an invalid configuration file keeps the old one and says why", func(t *testing.T) {
		e.applyConfig(t, strings.Replace(e.config(""), "timeout: 60s", "timeout: forever", 1), false)
		defer e.applyConfig(t, e.config(""), true)
		for _, p := range e.procs {
			harness.WaitFor(t, 10*time.Second, "reload failure logged", func() bool {
				return strings.Contains(p.LogT(t), `"msg":"configuration reload failed; keeping the previous configuration"`)
			})
		}
		cp.WaitEvent(t, 10*time.Second, "Pod", "webhook-a", api.EventCleanupConfigInvalid, "plugins.portworx.timeout")
		// The previous configuration (portworx enabled) keeps running.
		const name = "after-invalid"
		e.px.set(name, pxOK)
		e.createNode(t, name)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		e.waitGone(t, name, 30*time.Second)
		if calls := e.px.callsFor(name); len(calls) != 1 {
			t.Errorf("portworx calls for %s = %+v, want one (old configuration)", name, calls)
		}
	})

	t.Run("killing the leader mid-cleanup: the other replica finishes it, never before the critical plugins succeed", func(t *testing.T) {
		const name = "handover-1"
		e.px.set(name, pxHang)
		e.createNode(t, name)
		old := e.leader(t)
		standby := e.other(old)
		cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
		waitArrived(t, e.px, name)
		if err := old.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-old.Done()
		e.procs = []*harness.Daemon{standby}
		// The standby takes the Lease and runs the pipeline again: portworx is
		// asked a second time, and the node is still there, held by the finalizer.
		waitArrived(t, e.px, name)
		if n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || !slices.Contains(n.Finalizers, fin) {
			t.Fatalf("node %s before portworx answered: %v, want it present with the finalizer", name, err)
		}
		if got := standby.Metric(t, "node_cleanup_leader"); got != 1 {
			t.Errorf("%s node_cleanup_leader = %v after takeover", standby.Name, got)
		}
		close(e.px.release)
		e.waitGone(t, name, 30*time.Second)
		calls := e.px.callsFor(name)
		if len(calls) != 2 || calls[0].status != 0 || calls[1].status != 200 {
			t.Errorf("portworx calls %+v, want the killed leader's abandoned call, then the new leader's successful one", calls)
		}
	})

	t.Run("remove-finalizers strands nothing and deletion is instant afterwards", func(t *testing.T) {
		for i := range 3 {
			e.createNode(t, fmt.Sprintf("uninstall-%d", i)) // back-fill: replica A (admission) is dead
		}
		// As the chart runs it: the pre-delete Job's own identity.
		uninstall, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.UninstallServiceAccount)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(harness.BuiltBinary(t, harness.WebhookBinary), "remove-finalizers", "--kubeconfig="+uninstall, "--webhook-config-name="+mwc).CombinedOutput()
		if err != nil {
			t.Fatalf("remove-finalizers: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "mutatingwebhookconfiguration "+mwc+": deleted") {
			t.Errorf("output does not report the configuration deleted first:\n%s", out)
		}
		if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mwc, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("webhook configuration still there: %v", err)
		}
		list, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) < 3 {
			t.Fatalf("%d nodes left, want the uninstall-* ones at least", len(list.Items))
		}
		for _, n := range list.Items {
			if slices.Contains(n.Finalizers, fin) {
				t.Errorf("node %s still has %s", n.Name, fin)
			}
		}
		// A replica still running does not put it back, and nothing waits on it.
		cp.KubectlT(t, harness.NodeYAML("after-uninstall", nil), "create", "-f", "-")
		for _, name := range []string{"uninstall-0", "after-uninstall"} {
			cp.KubectlT(t, "", "delete", "node", name, "--timeout=5s")
			if _, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("node %s still there right after kubectl delete returned: %v", name, err)
			}
		}
	})
}

// webhookIdentity applies the chart's RBAC in ns and returns a kubeconfig
// of the webhook's ServiceAccount.
func webhookIdentity(t *testing.T, cp *harness.ControlPlane) string {
	t.Helper()
	if err := cp.ApplyChartRBAC(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// startReplica runs a webhook replica named name (its pod name too) on ip
// with the chart's identity and the cleanup configuration at config, then
// args; it returns once the replica is ready.
func startReplica(t *testing.T, cp *harness.ControlPlane, name, ip, config string, args ...string) *harness.Daemon {
	t.Helper()
	w := cp.StartWebhook(t, name, ip, append([]string{
		"--kubeconfig=" + webhookIdentity(t, cp), "--namespace=" + ns, "--pod-name=" + name,
		"--webhook-config-name=", "--extra-sans=" + ip, "--config=" + config,
	}, args...)...)
	w.WaitReady(t, 30*time.Second)
	return w
}

// leader is the replica reporting node_cleanup_leader 1.
func (e *env) leader(t *testing.T) *harness.Daemon {
	t.Helper()
	var found *harness.Daemon
	harness.WaitFor(t, 30*time.Second, "a leader", func() bool {
		for _, p := range e.procs {
			if v, err := p.TryMetric("node_cleanup_leader"); err == nil && v == 1 {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

func (e *env) other(p *harness.Daemon) *harness.Daemon {
	for _, q := range e.procs {
		if q != p {
			return q
		}
	}
	return nil
}

// createNode creates a Node with real kubectl and waits for our finalizer.
func (e *env) createNode(t *testing.T, name string) {
	t.Helper()
	e.cp.KubectlT(t, harness.NodeYAML(name, map[string]string{corev1.LabelHostname: name}), "create", "-f", "-")
	e.cp.WaitNode(t, name, 30*time.Second, "finalizer "+fin, func(n *corev1.Node) bool { return slices.Contains(n.Finalizers, fin) })
}

func (e *env) waitGone(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	e.cp.WaitNodeGone(t, name, timeout)
}

// waitEvent waits for an Event with reason on the Node whose note contains note.
func (e *env) waitEvent(t *testing.T, node, reason, note string) {
	t.Helper()
	e.cp.WaitEvent(t, 15*time.Second, "Node", node, reason, note)
}

// applyConfig rewrites the configuration file and waits until every running
// replica has reloaded it (valid) or rejected it.
func (e *env) applyConfig(t *testing.T, content string, valid bool) {
	t.Helper()
	result := `result="success"`
	if !valid {
		result = `result="invalid"`
	}
	before := make([]float64, len(e.procs))
	for i, p := range e.procs {
		before[i] = p.Metric(t, "node_cleanup_config_reloads_total", result)
	}
	if err := os.WriteFile(e.configPath+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(e.configPath+".tmp", e.configPath); err != nil {
		t.Fatal(err)
	}
	for i, p := range e.procs {
		harness.WaitFor(t, 10*time.Second, p.Name+" reloaded the configuration", func() bool {
			v, err := p.TryMetric("node_cleanup_config_reloads_total", result)
			return err == nil && v > before[i]
		})
	}
}

func waitArrived(t *testing.T, px *portworx, node string) {
	t.Helper()
	select {
	case got := <-px.arrived:
		if got != node {
			t.Fatalf("portworx call for %s, want %s", got, node)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("no portworx call for %s", node)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// logLine is the byte offset of the first line of log holding every part, or -1.
func logLine(log string, parts ...string) int {
	off := 0
	for _, line := range strings.SplitAfter(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return off
		}
		off += len(line)
	}
	return -1
}

func mustCreate(t *testing.T, ctx context.Context, cp *harness.ControlPlane, obj any) {
	t.Helper()
	var err error
	switch o := obj.(type) {
	case *storagev1.StorageClass:
		_, err = cp.Client.StorageV1().StorageClasses().Create(ctx, o, metav1.CreateOptions{})
	case *corev1.Namespace:
		_, err = cp.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
	default:
		t.Fatalf("mustCreate: %T", obj)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func createVA(t *testing.T, ctx context.Context, cp *harness.ControlPlane, name, node string) string {
	t.Helper()
	pv := "pv-for-" + name
	_, err := cp.Client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: "csi.e2e.example", NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// createLocalPV creates a local PersistentVolume pinned to node, bound to a
// new claim in namespace apps when claim is set.
func createLocalPV(t *testing.T, ctx context.Context, cp *harness.ControlPlane, name, node, class, claim string) (string, string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/" + name}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	if claim != "" {
		c, err := cp.Client.CoreV1().PersistentVolumeClaims("apps").Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class, VolumeName: name,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: "apps", Name: claim, UID: c.UID}
	}
	if _, err := cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name, claim
}

// playProtectionControllers stands in for kube-controller-manager, which the
// harness does not run: it lifts the PV/PVC protection finalizers of objects
// being deleted, as the real controllers do once nothing uses them.
func playProtectionControllers(ctx context.Context, cp *harness.ControlPlane) {
	lift := []byte(`{"metadata":{"finalizers":null}}`)
	for ctx.Err() == nil {
		if pvcs, err := cp.Client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{}); err == nil {
			for _, c := range pvcs.Items {
				if c.DeletionTimestamp != nil && len(c.Finalizers) > 0 {
					cp.Client.CoreV1().PersistentVolumeClaims(c.Namespace).Patch(ctx, c.Name, types.MergePatchType, lift, metav1.PatchOptions{})
				}
			}
		}
		if pvs, err := cp.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{}); err == nil {
			for _, p := range pvs.Items {
				if p.DeletionTimestamp != nil && len(p.Finalizers) > 0 {
					cp.Client.CoreV1().PersistentVolumes().Patch(ctx, p.Name, types.MergePatchType, lift, metav1.PatchOptions{})
				}
			}
		}
		time.Sleep(200 * time.Millisecond) // pacing: the stand-in controllers look 5 times a second
	}
}

// watchStatus records every distinct value of the cleanup status annotation
// on the node from now on; the returned function gives them in order.
func watchStatus(t *testing.T, cp *harness.ControlPlane, node string) func() []string {
	t.Helper()
	w, err := cp.Client.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			v := n.Annotations[nodecleanup.StatusAnnotation]
			mu.Lock()
			if v != "" && (len(seen) == 0 || seen[len(seen)-1] != v) {
				seen = append(seen, v)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}
