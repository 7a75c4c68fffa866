package webhookserver

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/finalizer"
	"github.com/kube-node-ready/kube-node-ready/internal/webhookopts"
)

// RemoveFinalizers is the uninstall command: it deletes the
// MutatingWebhookConfiguration first (no new Node gets the finalizer, and a
// running leader stops back-filling), then strips our finalizer from every
// Node, so nothing is left stuck in Terminating.
func RemoveFinalizers(ctx context.Context, opts webhookopts.Options, out io.Writer) error {
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
	n, err := finalizer.RemoveAll(ctx, mc, opts.Finalizer, func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
	})
	if err != nil {
		return fmt.Errorf("remove finalizer %s (%d nodes done): %w", opts.Finalizer, n, err)
	}
	fmt.Fprintf(out, "finalizer %s removed from %d nodes; no node carries it\n", opts.Finalizer, n)
	return nil
}
