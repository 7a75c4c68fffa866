//go:build e2e

package chart_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// finRelease is a release of its own, so these tests neither depend on nor
// disturb the shared one.
const finRelease = "fin"

// runners counts the nodes created to run hook Jobs on.
var runners int

// TestChartRefusesAStrandedFinalizer: values under which the finalizer
// would be added with nothing to remove it are refused before anything
// reaches the cluster (by the chart's render-time checks, which say the
// value set and why, or by the schema); turning cleanup off together with
// back-fill renders no admission webhook at all.
func TestChartRefusesAStrandedFinalizer(t *testing.T) {
	// Cleanup off alone keeps back-fill's default: refused with the value
	// set, why, and the fix, by helm install and upgrade too.
	for _, sets := range [][]string{
		{"webhook.cleanup.enabled=false"},
		{"webhook.cleanup.enabled=false", "webhook.backfill=true"},
	} {
		t.Run(strings.Join(sets, ","), func(t *testing.T) {
			refusedEverywhere(t, sets, "webhook.cleanup.enabled=false is refused while webhook.backfill=true",
				"adds the finalizer "+finalizer+" to every node", "nothing removes it", "Set webhook.backfill=false as well")
		})
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"webhook.cleanup.deadlineMinAttempts=0"}, "deadlineMinAttempts"},
		{[]string{"webhook.uninstall.cleanupWait=soon"}, "cleanupWait"},
		{[]string{"webhook.legacyFinalizers={old-name}"}, "legacyFinalizers"},
	} {
		t.Run(strings.Join(tc.sets, ","), func(t *testing.T) {
			args := []string{"template", release, chart, "-n", namespace, "--kube-version", "1.36.0"}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			out, err := helm(t, args...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("helm template %v: err=%v, want a schema error naming %q:\n%s", tc.sets, err, tc.want, out)
			}
		})
	}
	out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
		"--set", "webhook.cleanup.enabled=false", "--set", "webhook.backfill=false")
	if err != nil {
		t.Fatalf("helm template with cleanup and back-fill off: %v\n%s", err, out)
	}
	if strings.Contains(out, "kind: MutatingWebhookConfiguration") {
		t.Errorf("a MutatingWebhookConfiguration is rendered with cleanup off: admission would add a finalizer nothing removes")
	}
	if !strings.Contains(out, "- --backfill=false\n") || !strings.Contains(out, "- --cleanup=false\n") {
		t.Errorf("the webhook is not run with --backfill=false --cleanup=false: back-fill would add a finalizer nothing removes")
	}
}

// createHeldNodes creates nodes carrying finalizers (ours, under the names
// given, and a foreign one); with terminating, it deletes the last, which
// stays Terminating.
func createHeldNodes(t *testing.T, prefix string, terminating bool, finalizers ...string) []string {
	t.Helper()
	var names []string
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Finalizers: append(slices.Clone(finalizers), "example.com/keep")}}
		if _, err := cp.Client.CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, n.Name)
	}
	if !terminating {
		return names
	}
	if err := cp.Client.CoreV1().Nodes().Delete(t.Context(), names[2], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	return names
}

// onlyForeignLeft checks that nodes keep only the foreign finalizer.
func onlyForeignLeft(t *testing.T, names []string) {
	t.Helper()
	for _, name := range names {
		n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(n.Finalizers, []string{"example.com/keep"}) {
			t.Errorf("node %s finalizers = %v, want only the foreign one kept", name, n.Finalizers)
		}
	}
}

// helmWithHooks runs helm while playing the Jobs it creates in namespace
// ns (on a node of their own): its hooks, which helm waits for, and plain
// Jobs such as the finalizer removal a disabling upgrade renders, which it
// does not wait for, so the player goes on until every Job completed (30 s
// at most). It returns the Jobs run.
func helmWithHooks(t *testing.T, ns string, args ...string) []string {
	t.Helper()
	runners++
	runner, err := cp.CreateNode(t.Context(), fmt.Sprintf("hook-runner-%d", runners), harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hookCtx, stop := context.WithCancel(t.Context())
	ran := playHookJobs(hookCtx, t, runner, ns)
	out, err := helm(t, args...)
	if err == nil {
		harness.Eventually(t, 30*time.Second, "every Job in "+ns+" completed", func() (bool, string) {
			jobs, lerr := cp.Client.BatchV1().Jobs(ns).List(t.Context(), metav1.ListOptions{})
			if lerr != nil {
				return false, lerr.Error()
			}
			for _, j := range jobs.Items {
				if j.Status.Succeeded == 0 {
					return false, "job " + j.Name + " not completed"
				}
			}
			return true, ""
		})
	}
	stop()
	jobs := <-ran
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	return jobs
}

// TestDisablingByUpgradeStripsFinalizers: a `helm upgrade` that leaves
// nothing to remove the finalizer (the webhook disabled, or its cleanup)
// removes it from every node as uninstall does, so no node deletion hangs.
func TestDisablingByUpgradeStripsFinalizers(t *testing.T) {
	for _, tc := range []struct {
		name string
		sets []string
	}{
		{"webhook disabled", []string{"webhook.enabled=false"}},
		{"cleanup disabled", []string{"webhook.cleanup.enabled=false", "webhook.backfill=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := helm(t, "install", finRelease, chart, "-n", namespace, "--create-namespace"); err != nil {
				t.Fatalf("helm install: %v\n%s", err, out)
			}
			names := createHeldNodes(t, "disable-"+strings.Fields(tc.name)[0], true, finalizer)
			args := []string{"upgrade", finRelease, chart, "-n", namespace, "--timeout", "60s"}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			jobs := helmWithHooks(t, namespace, args...)
			if len(jobs) != 1 {
				t.Errorf("hook jobs run by the upgrade: %v, want the finalizer removal once", jobs)
			}
			onlyForeignLeft(t, names)
			// Once nothing adds the finalizer, later upgrades run no Job.
			if jobs := helmWithHooks(t, namespace, args...); len(jobs) != 0 {
				t.Errorf("hook jobs run by a second upgrade with cleanup already off: %v, want none", jobs)
			}
			if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(t.Context(), finRelease+"-kube-node-ready-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("webhook configuration after the upgrade: %v, want NotFound", err)
			}
			helmWithHooks(t, namespace, "uninstall", finRelease, "-n", namespace, "--timeout", "60s")
		})
	}
}

// TestRenamedFinalizerIsStillRemoved: after `helm upgrade --set
// webhook.finalizer=<new>`, the webhook knows the old name as legacy (it
// removes and replaces it), and uninstall removes both names.
func TestRenamedFinalizerIsStillRemoved(t *testing.T) {
	const renamed = "example.com/renamed-cleanup"
	if out, err := helm(t, "install", finRelease, chart, "-n", namespace, "--create-namespace"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	names := createHeldNodes(t, "renamed", false, finalizer)
	if out, err := helm(t, "upgrade", finRelease, chart, "-n", namespace, "--set", "webhook.finalizer="+renamed); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	d, err := cp.Client.AppsV1().Deployments(namespace).Get(t.Context(), finRelease+"-kube-node-ready-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"--finalizer=" + renamed, "--legacy-finalizers=" + finalizer} {
		if !slices.Contains(args, want) {
			t.Errorf("webhook args %q lack %s", args, want)
		}
	}
	// A second upgrade keeps the old name.
	if out, err := helm(t, "upgrade", finRelease, chart, "-n", namespace, "--reuse-values", "--set", "webhook.replicas=1"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	names = append(names, createHeldNodes(t, "renamed-new", false, renamed)...)
	helmWithHooks(t, namespace, "uninstall", finRelease, "-n", namespace, "--timeout", "60s")
	onlyForeignLeft(t, names)
}
