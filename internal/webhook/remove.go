package webhook

import (
	"context"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/finalizer"
)

// RemoveFinalizers is the uninstall command: it deletes the
// MutatingWebhookConfiguration first (no new Node gets the finalizer, and a
// running leader stops back-filling), then strips our finalizer from every
// Node, so nothing is left stuck in Terminating.
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
	if name := opts.WebhookConfigName; name != "" {
		err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{})
		switch {
		case apierrors.IsNotFound(err):
			fmt.Fprintf(out, "mutatingwebhookconfiguration %s: already gone\n", name)
		case err != nil:
			return fmt.Errorf("delete mutatingwebhookconfiguration %s: %w", name, err)
		default:
			fmt.Fprintf(out, "mutatingwebhookconfiguration %s: deleted\n", name)
		}
	}
	n, err := removeAll(ctx, mc, opts.Finalizer, func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
	})
	if err != nil {
		return fmt.Errorf("remove finalizer %s (%d nodes done): %w", opts.Finalizer, n, err)
	}
	fmt.Fprintf(out, "finalizer %s removed from %d nodes; no node carries it\n", opts.Finalizer, n)
	return nil
}

// removeAll strips fin from every Node, passing over the list every
// 2 s until a pass after the first finds none left (a watcher that had not
// yet noticed the webhook configuration is gone may add it back in between).
// It returns how many Nodes it changed.
func removeAll(ctx context.Context, client metadata.Interface, fin string, logf func(string, ...any)) (int, error) {
	changed, passes := 0, 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := client.Resource(finalizer.NodesResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			logf("list nodes: %v (retrying)", err)
			return false, nil
		}
		left := 0
		for _, n := range list.Items {
			ok, err := finalizer.RemoveFinalizer(ctx, client, n.Name, n.UID, n.Finalizers, fin)
			if err != nil {
				logf("%v (retrying)", err)
				left++
				continue
			}
			if ok {
				changed++
				left++ // check again next pass
				logf("removed %s from node %s", fin, n.Name)
			}
		}
		passes++
		return left == 0 && passes >= 2, nil
	})
	return changed, err
}
