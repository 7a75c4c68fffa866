package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
)

// RemoveFinalizers is the uninstall (and disable) command: it deletes the
// MutatingWebhookConfiguration first (no new Node gets the finalizer, and a
// running leader stops back-filling), waits up to opts.CleanupWait for
// cleanups in progress to finish, then strips our finalizer (its legacy
// names, the shipped ones and, with --finalizer-record, the names the
// release's record lists: releaseFinalizers) from every Node, so nothing is
// left stuck in Terminating. Each node whose cleanup it cuts short is named,
// with where its cleanup stood.
func RemoveFinalizers(ctx context.Context, opts Options, out io.Writer) error {
	cfg, err := restConfig(opts.Kubeconfig, opts.KubeAPIQPS, opts.KubeAPIBurst)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if name := opts.WebhookConfigName; name != "" {
		err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			logf("mutatingwebhookconfiguration %s: already gone", name)
		case err != nil:
			return fmt.Errorf("delete mutatingwebhookconfiguration %s: %w", name, err)
		default:
			logf("mutatingwebhookconfiguration %s: deleted", name)
		}
	}
	owned, err := releaseFinalizers(ctx, client, opts)
	if err != nil {
		return err
	}
	if len(owned) == 0 {
		logf("no webhook of this release ran here (neither configmap %s/%s nor lease %s/%s exists): no finalizer of its own to remove", opts.Namespace, opts.FinalizerRecord, opts.LeaseNS(), opts.LeaseName)
		return nil
	}
	if opts.CleanupWait > 0 {
		waitForCleanups(ctx, mc, owned, opts.CleanupWait, logf)
	}
	n, err := removeAll(ctx, mc, owned, logf)
	names := strings.Join(owned, ", ")
	if err != nil {
		return fmt.Errorf("remove finalizer %s (%d nodes done): %w", names, n, err)
	}
	logf("finalizer %s removed from %d nodes; no node carries it", names, n)
	return nil
}

// cleanupsRunning lists the nodes being deleted that carry one of owned and
// whose cleanup may be under way, with where each stands.
func cleanupsRunning(ctx context.Context, client metadata.Interface, owned []string) ([]string, error) {
	list, err := client.Resource(nodecleanup.NodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var running []string
	for i := range list.Items {
		n := &list.Items[i]
		if n.DeletionTimestamp == nil || !carriesAny(n.Finalizers, owned) {
			continue
		}
		if p := nodecleanup.CleanupProgress(n); p.Running {
			running = append(running, n.Name+": "+p.Reason)
		}
	}
	return running, nil
}

// waitForCleanups gives the cleanups in progress up to limit to finish
// (the webhook still runs them: the uninstall hook runs before its
// Deployment goes), so that stripping the finalizer skips as few as possible.
// Failing cleanups, which wait for their next retry, are not waited for.
func waitForCleanups(ctx context.Context, client metadata.Interface, owned []string, limit time.Duration, logf func(string, ...any)) {
	start := time.Now()
	var running []string
	announced := false
	err := wait.PollUntilContextTimeout(ctx, time.Second, limit, true, func(ctx context.Context) (bool, error) {
		now, err := cleanupsRunning(ctx, client, owned)
		if err != nil {
			logf("list nodes: %v (retrying)", err)
			return false, nil
		}
		running = now
		if len(running) > 0 && !announced {
			logf("waiting up to %s for %d node cleanups in progress: %s", limit, len(running), strings.Join(running, "; "))
			announced = true
		}
		return len(running) == 0, nil
	})
	switch {
	case err != nil:
		logf("stopped waiting after %s with %d node cleanups still in progress", limit, len(running))
	case announced:
		logf("node cleanups in progress finished after %s", time.Since(start).Round(time.Second))
	}
}

// removeAll strips the owned finalizers from every Node, passing over the
// list every 2 s until a pass after the first finds none left (a watcher
// that had not yet noticed the webhook configuration is gone may add it back
// in between). A node being deleted loses its cleanup with the finalizer: it
// is named with where its cleanup stood. It returns how many Nodes it changed.
func removeAll(ctx context.Context, client metadata.Interface, owned []string, logf func(string, ...any)) (int, error) {
	changed, passes := 0, 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.Resource(nodecleanup.NodesResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			logf("list nodes: %v (retrying)", err)
			return false, nil
		}
		left := 0
		for i := range list.Items {
			n := &list.Items[i]
			ok, err := nodecleanup.RemoveFinalizer(ctx, client, n.Name, n.UID, n.Finalizers, owned...)
			if err != nil {
				logf("%v (retrying)", err)
				left++
				continue
			}
			if !ok {
				continue
			}
			changed++
			left++ // check again next pass
			if n.DeletionTimestamp != nil {
				logf("removed the finalizer from node %s, being deleted: its cleanup is skipped; %s", n.Name, nodecleanup.CleanupProgress(n).Reason)
			} else {
				logf("removed the finalizer from node %s", n.Name)
			}
		}
		passes++
		return left == 0 && passes >= 2, nil
	})
	return changed, err
}

// releaseFinalizers are the finalizer names remove-finalizers removes:
// --finalizer, --legacy-finalizers and every shipped name
// (api.HonouredFinalizers). With --finalizer-record, they are this
// release's only: the record's names are added, and when neither the record
// nor the release's leader Lease exists, no webhook of this release ever ran
// here (an agent-only release) and there is nothing of its own to remove:
// none, so another release's finalizer is never taken off.
func releaseFinalizers(ctx context.Context, client kubernetes.Interface, opts Options) ([]string, error) {
	owned := append([]string{opts.Finalizer}, api.HonouredFinalizers(opts.Finalizer, opts.LegacyFinalizers)...)
	if opts.FinalizerRecord == "" {
		return owned, nil
	}
	cm, err := client.CoreV1().ConfigMaps(opts.Namespace).Get(ctx, opts.FinalizerRecord, metav1.GetOptions{})
	switch {
	case err == nil:
		// The chart's names, and those the webhook recorded itself.
		for _, name := range nodecleanup.RecordNames(cm.Data[nodecleanup.RecordChartKey] + "," + cm.Data[nodecleanup.RecordUsedKey]) {
			if domainQualified(name) == nil && !slices.Contains(owned, name) {
				owned = append(owned, name)
			}
		}
		return owned, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("read the finalizer record configmap %s/%s: %w", opts.Namespace, opts.FinalizerRecord, err)
	}
	// A webhook older than the record leaves its leader Lease behind.
	_, err = client.CoordinationV1().Leases(opts.LeaseNS()).Get(ctx, opts.LeaseName, metav1.GetOptions{})
	switch {
	case err == nil:
		return owned, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, fmt.Errorf("read lease %s/%s: %w", opts.LeaseNS(), opts.LeaseName, err)
	}
}

func carriesAny(finalizers, owned []string) bool {
	return slices.ContainsFunc(finalizers, func(f string) bool { return slices.Contains(owned, f) })
}
