//go:build e2e

package cleanup

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipUninstall = "10.213.0.29"
	pxUninstall = "10.213.0.39:9001"
)

// lines collects a command's output as it comes.
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.all = append(l.all, s); l.mu.Unlock() }

func (l *lines) text() string { l.mu.Lock(); defer l.mu.Unlock(); return strings.Join(l.all, "\n") }

// removeFinalizers starts the uninstall command as the chart's Job runs it
// (its own ServiceAccount) and returns its output so far and its end.
func removeFinalizers(t *testing.T, cp *harness.ControlPlane, args ...string) (*lines, <-chan error) {
	t.Helper()
	kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), ns, harness.UninstallServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), harness.BuiltBinary(t, harness.WebhookBinary), append([]string{"remove-finalizers", "--kubeconfig=" + kubeconfig, "--webhook-config-name="}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := &lines{}
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out.add(sc.Text())
		}
		done <- cmd.Wait()
	}()
	return out, done
}

func finished(t *testing.T, out *lines, done <-chan error) string {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("remove-finalizers: %v\n%s", err, out.text())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("remove-finalizers still running after 90 s:\n%s", out.text())
	}
	return out.text()
}

// TestRemoveFinalizersWaitsAndReports: the uninstall command waits a bounded
// time (--cleanup-wait) for cleanups in progress, so one that finishes in
// time is not skipped; every node whose cleanup it cuts short (still
// running past the wait, or failing) is named with where it stood.
func TestRemoveFinalizersWaitsAndReports(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	px, config := servePortworx(t, cp.Dir, pxUninstall, "5m")
	w := startReplica(t, cp, "webhook-uninstall", ipUninstall, config,
		// A failed attempt waits long for its retry: it stays "failing".
		"--cleanup-retry-base=5m", "--cleanup-retry-max=5m", "--log-level=debug")
	e := &env{cp: cp, dir: cp.Dir, px: px, procs: []*harness.Daemon{w}}
	e.leader(t)
	has := func(name string) bool {
		n, err := cp.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && slices.Contains(n.Finalizers, fin)
	}

	t.Run("a cleanup still running past the wait is named and stripped", func(t *testing.T) {
		const stuck = "uninstall-stuck"
		px.set(stuck, pxHang)
		e.createNode(t, stuck)
		cp.KubectlT(t, "", "delete", "node", stuck, "--wait=false")
		waitArrived(t, px, stuck)
		out, done := removeFinalizers(t, cp, "--cleanup-wait=2s")
		text := finished(t, out, done)
		for _, want := range []string{
			"waiting up to 2s for 1 node cleanups in progress: " + stuck,
			"stopped waiting after 2s with 1 node cleanups still in progress",
			"removed the finalizer from node " + stuck + ", being deleted: its cleanup is skipped; cleanup ",
		} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
		e.waitGone(t, stuck, 10*time.Second)
	})

	t.Run("a running cleanup that finishes within the wait is not skipped; a failing one is named", func(t *testing.T) {
		const slow, failing = "uninstall-slow", "uninstall-failing"
		px.set(failing, pxFail)
		e.createNode(t, failing)
		statuses := watchStatus(t, cp, failing)
		cp.KubectlT(t, "", "delete", "node", failing, "--wait=false")
		harness.WaitFor(t, 20*time.Second, "the failing node's status with its retry", func() bool {
			return slices.ContainsFunc(statuses(), func(s string) bool { return strings.Contains(s, `"retryIn"`) })
		})
		px.set(slow, pxHang)
		e.createNode(t, slow)
		cp.KubectlT(t, "", "delete", "node", slow, "--wait=false")
		waitArrived(t, px, slow)

		out, done := removeFinalizers(t, cp) // --cleanup-wait=1m by default
		harness.WaitFor(t, 20*time.Second, "remove-finalizers waiting for the slow cleanup", func() bool {
			return strings.Contains(out.text(), "for 1 node cleanups in progress: "+slow+": ")
		})
		if !has(slow) {
			t.Fatalf("node %s lost the finalizer while its cleanup was running", slow)
		}
		close(px.release) // the slow receiver answers: the webhook finishes
		text := finished(t, out, done)
		e.waitGone(t, slow, 10*time.Second)
		e.waitEvent(t, slow, api.EventCleanupCompleted, "portworx=success")
		if strings.Contains(text, "removed the finalizer from node "+slow) {
			t.Errorf("remove-finalizers stripped %s, whose cleanup finished within the wait:\n%s", slow, text)
		}
		for _, want := range []string{
			"node cleanups in progress finished after",
			"removed the finalizer from node " + failing + ", being deleted: its cleanup is skipped; cleanup failing (attempt 1, next in 5m0s): ",
			"portworx: failed: portworx: remove node " + failing,
		} {
			if !strings.Contains(text, want) {
				t.Errorf("output lacks %q:\n%s", want, text)
			}
		}
		e.waitGone(t, failing, 10*time.Second)
	})
}
