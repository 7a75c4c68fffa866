package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
)

// recordTimeout bounds how long the start waits for the API server to
// answer the finalizer record's read and write.
const recordTimeout = 30 * time.Second

// recordFinalizer writes --finalizer into the release's finalizer record
// (--finalizer-record) before anything adds it to a node, so that the
// removal Job knows it however the chart is rendered later. It refuses the
// start when nodes carry a custom name this release used before and this
// webhook may not remove (a rename through GitOps, which Helm's refusal does
// not see): the running replicas keep it, and the error names the way out.
// A missing record (the webhook run without the chart) is only logged.
func recordFinalizer(ctx context.Context, opts Options, client kubernetes.Interface, nodes metadata.Interface, log *slog.Logger) error {
	if opts.FinalizerRecord == "" {
		return nil
	}
	honoured := api.HonouredFinalizers(opts.Finalizer, opts.LegacyFinalizers)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, recordTimeout, true, func(ctx context.Context) (bool, error) {
		last = nodecleanup.RecordFinalizer(ctx, client.CoreV1().ConfigMaps(opts.Namespace), nodes, opts.FinalizerRecord, opts.Finalizer, honoured)
		var stranded *nodecleanup.StrandedError
		switch {
		case last == nil, errors.Is(last, nodecleanup.ErrNoRecord), errors.As(last, &stranded):
			return true, nil
		default:
			log.Warn("finalizer record not written yet; retrying", "configmap", opts.FinalizerRecord, "error", last)
			return false, nil
		}
	})
	switch {
	case errors.Is(last, nodecleanup.ErrNoRecord):
		log.Warn("no finalizer record: the removal Job will know only the names it is given", "configmap", opts.Namespace+"/"+opts.FinalizerRecord)
		return nil
	case last != nil:
		return fmt.Errorf("--finalizer-record: %w", last)
	case err != nil:
		return fmt.Errorf("--finalizer-record: %w", err)
	}
	log.Info("finalizer recorded", "configmap", opts.Namespace+"/"+opts.FinalizerRecord, "finalizer", opts.Finalizer)
	return nil
}
