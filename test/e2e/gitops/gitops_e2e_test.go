//go:build e2e

package gitops_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// foreign is someone else's finalizer: never touched.
	foreign = "example.com/keep"
	// renamed is a custom webhook.finalizer.
	renamed = "example.com/gitops-cleanup"
	// stuckBound is how long a node's deletion may take before it counts as stuck.
	stuckBound = 30 * time.Second
)

// object is one rendered manifest.
type object struct {
	doc string
	obj map[string]any
}

func (o object) kind() string { s, _ := o.obj["kind"].(string); return s }

func (o object) meta(field string) string {
	m, _ := o.obj["metadata"].(map[string]any)
	s, _ := m[field].(string)
	return s
}

func (o object) annotation(key string) string {
	m, _ := o.obj["metadata"].(map[string]any)
	a, _ := m["annotations"].(map[string]any)
	s, _ := a[key].(string)
	return s
}

func (o object) key() string { return o.kind() + "/" + o.meta("namespace") + "/" + o.meta("name") }

// path reads a nested field of the object.
func (o object) path(keys ...any) any {
	var cur any = o.obj
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := cur.(map[string]any)
			cur = m[k]
		case int:
			l, _ := cur.([]any)
			if k >= len(l) {
				return nil
			}
			cur = l[k]
		}
	}
	return cur
}

// gitops is one release managed the GitOps way.
type gitops struct {
	t           *testing.T
	release, ns string
	webhook     string // the webhook's name (Deployment, ServiceAccount, configuration)
	applied     []object
	ips         []string
	replicas    int
}

func newGitOps(t *testing.T, release string, ips ...string) *gitops {
	g := &gitops{t: t, release: release, ns: release, webhook: release + "-kube-node-ready-webhook", ips: ips}
	if _, err := cp.Kubectl(t.Context(), nil, "create", "namespace", g.ns); err != nil && !strings.Contains(err.Error(), "AlreadyExists") {
		t.Fatal(err)
	}
	return g
}

// render is `helm template` with sets; withHooks keeps Helm's hooks (only
// for the documented uninstall step), else --no-hooks as a GitOps tool
// applying plain manifests renders.
func (g *gitops) render(withHooks bool, sets ...string) []object {
	g.t.Helper()
	args := []string{"template", g.release, chart, "-n", g.ns, "--kube-version", "1.36.0"}
	if !withHooks {
		args = append(args, "--no-hooks")
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := cp.Helm(g.t.Context(), args...)
	if err != nil {
		g.t.Fatal(err)
	}
	var objs []object
	for _, doc := range strings.Split(out, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			g.t.Fatalf("rendered document: %v\n%s", err, doc)
		}
		if len(m) > 0 {
			objs = append(objs, object{doc: doc, obj: m})
		}
	}
	return objs
}

// sync applies objs with kubectl and prunes what the previous sync applied
// and objs no longer hold, as Argo CD and Flux do, but for what asks not to
// be pruned.
func (g *gitops) sync(objs []object) {
	g.t.Helper()
	var docs []string
	for _, o := range objs {
		docs = append(docs, o.doc)
	}
	cp.KubectlT(g.t, strings.Join(docs, "\n---\n"), "apply", "--server-side", "--force-conflicts", "-f", "-")
	for _, old := range g.applied {
		if slices.ContainsFunc(objs, func(o object) bool { return o.key() == old.key() }) ||
			strings.Contains(old.annotation("argocd.argoproj.io/sync-options"), "Prune=false") {
			continue
		}
		g.delete(old)
	}
	g.applied = objs
}

func (g *gitops) delete(o object) {
	g.t.Helper()
	args := []string{"delete", strings.ToLower(o.kind()), o.meta("name"), "--ignore-not-found", "--wait=false"}
	if ns := o.meta("namespace"); ns != "" {
		args = append(args, "-n", ns)
	}
	cp.KubectlT(g.t, "", args...)
}

func find(objs []object, kind string, match func(object) bool) (object, bool) {
	for _, o := range objs {
		if o.kind() == kind && (match == nil || match(o)) {
			return o, true
		}
	}
	return object{}, false
}

func stringsOf(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, s := range l {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// startWebhook runs the rendered Deployment's container as a process, with
// its flags (but for addresses and the mounted files), its ServiceAccount's
// token and the rendered cleanup configuration.
func (g *gitops) startWebhook(objs []object) *harness.Daemon {
	g.t.Helper()
	w := g.startWebhookProcess(objs)
	w.WaitReady(g.t, 30*time.Second)
	return w
}

// startWebhookProcess starts the webhook as startWebhook does, without
// waiting for it to serve.
func (g *gitops) startWebhookProcess(objs []object) *harness.Daemon {
	g.t.Helper()
	d, ok := find(objs, "Deployment", func(o object) bool { return o.meta("name") == g.webhook })
	if !ok {
		g.t.Fatal("no webhook Deployment rendered")
	}
	var args []string
	for _, a := range stringsOf(d.path("spec", "template", "spec", "containers", 0, "args")) {
		if !strings.HasPrefix(a, "--listen-address=") && !strings.HasPrefix(a, "--metrics-bind-address=") &&
			!strings.HasPrefix(a, "--config=") && !strings.HasPrefix(a, "--secrets-dir=") {
			args = append(args, a)
		}
	}
	if c, ok := find(objs, "ConfigMap", func(o object) bool { return o.meta("name") == g.webhook+"-cleanup" }); ok {
		file := filepath.Join(g.t.TempDir(), "config.yaml")
		if err := os.WriteFile(file, []byte(fmt.Sprint(c.path("data", "config.yaml"))), 0o644); err != nil {
			g.t.Fatal(err)
		}
		args = append(args, "--config="+file)
	}
	sa, _ := d.path("spec", "template", "spec", "serviceAccountName").(string)
	kubeconfig, err := cp.ServiceAccountKubeconfig(g.t.Context(), g.ns, sa)
	if err != nil {
		g.t.Fatal(err)
	}
	ip := g.ips[g.replicas%len(g.ips)]
	g.replicas++
	name := fmt.Sprintf("%s-webhook-%d", g.release, g.replicas)
	return cp.StartWebhook(g.t, name, ip, append(args, "--kubeconfig="+kubeconfig, "--namespace="+g.ns,
		"--pod-name="+name, "--extra-sans="+ip, "--log-level=debug")...)
}

// runJob runs the rendered Job's container command as a process under the
// Job's ServiceAccount, as its pod would, and returns its output.
func (g *gitops) runJob(job object) string {
	g.t.Helper()
	sa, _ := job.path("spec", "template", "spec", "serviceAccountName").(string)
	kubeconfig, err := cp.ServiceAccountKubeconfig(g.t.Context(), g.ns, sa)
	if err != nil {
		g.t.Fatal(err)
	}
	args := append(stringsOf(job.path("spec", "template", "spec", "containers", 0, "args")), "--kubeconfig="+kubeconfig)
	out, err := exec.CommandContext(g.t.Context(), harness.BuiltBinary(g.t, harness.WebhookBinary), args...).CombinedOutput()
	if err != nil {
		g.t.Fatalf("job %s %v: %v\n%s", job.meta("name"), args, err, out)
	}
	g.t.Logf("job %s:\n%s", job.meta("name"), out)
	return string(out)
}

// removalJob is the Job the render holds for a change that leaves nothing to
// remove the finalizer.
func removalJob(t *testing.T, objs []object) object {
	t.Helper()
	job, ok := find(objs, "Job", func(o object) bool {
		return slices.Contains(stringsOf(o.path("spec", "template", "spec", "containers", 0, "args")), "remove-finalizers")
	})
	if !ok {
		t.Fatal("the chart rendered by helm template --no-hooks holds no Job that removes the finalizer: every node keeps it with nothing to remove it")
	}
	return job
}

// createNode creates a Node carrying finalizers.
func createNode(t *testing.T, name string, finalizers ...string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: finalizers}}
	if _, err := cp.Client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitFinalizers(t *testing.T, name string, want ...string) {
	t.Helper()
	cp.WaitNode(t, name, stuckBound, fmt.Sprintf("finalizers %q", want), func(n *corev1.Node) bool {
		return slices.Equal(n.Finalizers, want)
	})
}

// deletionCompletes deletes a node and fails the test when it is still there
// after stuckBound.
func deletionCompletes(t *testing.T, name string) {
	t.Helper()
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitGone(t, name)
}

func waitGone(t *testing.T, name string) {
	t.Helper()
	deadline := time.Now().Add(stuckBound)
	for {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: deletion stuck for %s with finalizers %q", name, stuckBound, n.Finalizers)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGitOpsLifecycleStrandsNoDeletion: the chart rendered by `helm template
// --no-hooks` and applied with kubectl (objects no longer rendered pruned)
// through install, a rename of the finalizer, disabling the webhook and
// deleting the release: no node's deletion is ever stuck, and someone
// else's finalizer is never touched.
func TestGitOpsLifecycleStrandsNoDeletion(t *testing.T) {
	g := newGitOps(t, "gitops", "10.213.0.71", "10.213.0.72", "10.213.0.73")
	// witness lives through every step beside someone else's finalizer.
	createNode(t, "gitops-witness", foreign)

	// Install: nodes get the finalizer and their deletions complete.
	installed := g.render(false)
	g.sync(installed)
	w := g.startWebhook(installed)
	waitFinalizers(t, "gitops-witness", foreign, api.Finalizer)
	createNode(t, "gitops-install")
	waitFinalizers(t, "gitops-install", api.Finalizer)
	deletionCompletes(t, "gitops-install")
	createNode(t, "gitops-held-old")
	waitFinalizers(t, "gitops-held-old", api.Finalizer)

	// Rename: the new webhook knows the shipped name without lookup. A node
	// deleted while no webhook ran, under the old name, is released by it.
	renamedObjs := g.render(false, "webhook.finalizer="+renamed)
	g.sync(renamedObjs)
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), "gitops-held-old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w = g.startWebhook(renamedObjs)
	waitGone(t, "gitops-held-old")
	waitFinalizers(t, "gitops-witness", foreign, renamed)
	createNode(t, "gitops-renamed")
	waitFinalizers(t, "gitops-renamed", renamed)
	deletionCompletes(t, "gitops-renamed")
	createNode(t, "gitops-held-renamed")
	waitFinalizers(t, "gitops-held-renamed", renamed)

	// Disable: the webhook and its configuration are pruned; the rendered
	// removal Job takes the finalizer off every node, including one being
	// deleted meanwhile.
	disabled := g.render(false, "webhook.finalizer="+renamed, "webhook.enabled=false")
	g.sync(disabled)
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), "gitops-held-renamed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.runJob(removalJob(t, disabled))
	waitGone(t, "gitops-held-renamed")
	waitFinalizers(t, "gitops-witness", foreign)
	createNode(t, "gitops-disabled")
	deletionCompletes(t, "gitops-disabled")
	// The next sync runs the Job again (Argo CD's PostSync, or a re-apply
	// after its TTL): nothing changes.
	g.runJob(removalJob(t, disabled))
	waitFinalizers(t, "gitops-witness", foreign)

	// Enabled again, then the release deleted the documented way: the
	// uninstall Job (Helm's pre-delete hook, rendered with hooks) runs, then
	// everything rendered goes.
	enabled := g.render(false, "webhook.finalizer="+renamed)
	g.sync(enabled)
	w = g.startWebhook(enabled)
	waitFinalizers(t, "gitops-witness", foreign, renamed)
	createNode(t, "gitops-held-last")
	waitFinalizers(t, "gitops-held-last", renamed)
	var hooks []object
	for _, o := range g.render(true, "webhook.finalizer="+renamed) {
		if o.annotation("helm.sh/hook") == "pre-delete" {
			hooks = append(hooks, o)
		}
	}
	g.sync(append(slices.Clone(enabled), hooks...))
	uninstall, ok := find(hooks, "Job", nil)
	if !ok {
		t.Fatal("no uninstall Job rendered with hooks")
	}
	g.runJob(uninstall)
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, o := range g.applied {
		g.delete(o)
	}
	waitFinalizers(t, "gitops-witness", foreign)
	deletionCompletes(t, "gitops-held-last")
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), g.webhook, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration after the release was deleted: %v, want NotFound", err)
	}
}

// TestRemovalJobIsScopedToItsRelease: an agent-only release (webhook.enabled
// false from the start) renders the removal Job too, since its values
// leave nothing to remove a finalizer; its Job, run at every sync, must not
// take another release's finalizer (the same default name) off the nodes.
func TestRemovalJobIsScopedToItsRelease(t *testing.T) {
	createNode(t, "scoped-held", api.Finalizer, foreign)
	agents := newGitOps(t, "agents")
	objs := agents.render(false, "webhook.enabled=false")
	agents.sync(objs)
	out := agents.runJob(removalJob(t, objs))
	if !strings.Contains(out, "no webhook of this release ran here") {
		t.Errorf("the agent-only release's Job does not say it had nothing to remove:\n%s", out)
	}
	waitFinalizers(t, "scoped-held", api.Finalizer, foreign)
}

// TestHelmRefusesLeavingACustomFinalizer: a custom webhook.finalizer is
// honoured only while it is the current name, so `helm upgrade`, which can
// see the running Deployment, refuses to rename it away while the webhook
// stays on, naming the name and the way out; disabling the webhook (whose
// removal Job takes the recorded name off) is accepted.
func TestHelmRefusesLeavingACustomFinalizer(t *testing.T) {
	const release, ns = "custom", "custom"
	if out, err := cp.Helm(t.Context(), "install", release, chart, "-n", ns, "--create-namespace", "--no-hooks", "--set", "webhook.finalizer="+renamed); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	out, err := cp.Helm(t.Context(), "upgrade", release, chart, "-n", ns, "--no-hooks", "--set", "webhook.finalizer=example.com/another-cleanup")
	if err == nil || !strings.Contains(out, `the running webhook uses the custom finalizer "`+renamed+`"`) || !strings.Contains(out, "Keep webhook.finalizer="+renamed) {
		t.Errorf("helm upgrade renaming a custom finalizer: err=%v, want refused naming it:\n%s", err, out)
	}
	if out, err := cp.Helm(t.Context(), "upgrade", release, chart, "-n", ns, "--no-hooks", "--set", "webhook.finalizer=example.com/another-cleanup", "--set", "webhook.enabled=false"); err != nil {
		t.Errorf("helm upgrade disabling the webhook and renaming at once: %v\n%s", err, out)
	}
	if _, err := cp.Helm(t.Context(), "uninstall", release, "-n", ns, "--no-hooks"); err != nil {
		t.Error(err)
	}
}

// recordUsed is what the release's webhook recorded in its finalizer record.
func (g *gitops) recordUsed() string {
	g.t.Helper()
	cm, err := cp.Client.CoreV1().ConfigMaps(g.ns).Get(g.t.Context(), g.webhook+"-finalizers", metav1.GetOptions{})
	if err != nil {
		g.t.Fatal(err)
	}
	return cm.Data["used"]
}

// TestGitOpsRenameAwayFromACustomFinalizer: a custom finalizer is recorded
// by the webhook that adds it. Renamed away through GitOps (no lookup, so no
// render can refuse it), the new webhook does not start while nodes carry
// the old name, which it may not remove, and says the way out. The way out, disabling the webhook, takes the
// recorded name off every node even though the values no longer name it;
// the webhook then starts under the new name. Its token may add to the
// record only the name it runs with.
func TestGitOpsRenameAwayFromACustomFinalizer(t *testing.T) {
	const c2 = "example.com/gitops-second"
	g := newGitOps(t, "custom-rename", "10.213.0.74", "10.213.0.75", "10.213.0.76")
	first := g.render(false, "webhook.finalizer="+renamed)
	g.sync(first)
	w := g.startWebhook(first)
	createNode(t, "custom-held")
	waitFinalizers(t, "custom-held", renamed)
	if got := g.recordUsed(); got != renamed {
		t.Fatalf("the record's used names = %q, want %q", got, renamed)
	}

	t.Run("the record admits only the webhook's own name", func(t *testing.T) {
		kubeconfig, err := cp.ServiceAccountKubeconfig(t.Context(), g.ns, g.webhook)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cms := client.CoreV1().ConfigMaps(g.ns)
		for _, tc := range []struct{ key, value, want string }{
			{"used", renamed + ",karpenter.sh/termination", "may add to its finalizer record only the name it runs with"},
			{"finalizers", "karpenter.sh/termination", "may change only the used names"},
		} {
			var err error
			for range 50 { // the policy is compiled asynchronously
				cm, gerr := cms.Get(t.Context(), g.webhook+"-finalizers", metav1.GetOptions{})
				if gerr != nil {
					t.Fatal(gerr)
				}
				cm.Data[tc.key] = tc.value
				if _, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the webhook writing %s=%s into its record: %v, want denied: %s", tc.key, tc.value, err, tc.want)
			}
		}
	})

	second := g.render(false, "webhook.finalizer="+c2)
	g.sync(second)
	refused := g.startWebhookProcess(second)
	select {
	case <-refused.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("the webhook renamed away from a custom finalizer that nodes carry started anyway")
	}
	if log := refused.Tail(20); !strings.Contains(log, "finalizer "+renamed+", which this release's webhook added before") || !strings.Contains(log, "custom-held") ||
		!strings.Contains(log, "set webhook.finalizer back to "+renamed) {
		t.Errorf("the refused webhook does not name the stranded name, its node and the way out:\n%s", log)
	}
	// The running replica keeps serving, but the node policy applied with
	// the new render no longer lets it remove the old name: deletions wait
	// for the way out (docs/install.md, GitOps).

	// The way out: disable (the values name only the new finalizer now).
	disabled := g.render(false, "webhook.finalizer="+c2, "webhook.enabled=false")
	g.sync(disabled)
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), "custom-held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	g.runJob(removalJob(t, disabled))
	waitGone(t, "custom-held")

	enabled := g.render(false, "webhook.finalizer="+c2)
	g.sync(enabled)
	g.startWebhook(enabled)
	createNode(t, "custom-after")
	waitFinalizers(t, "custom-after", c2)
	if got := g.recordUsed(); got != c2 {
		t.Errorf("the record's used names = %q, want only %q (the old name is on no node)", got, c2)
	}
	deletionCompletes(t, "custom-after")
}
