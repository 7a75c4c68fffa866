package nodecleanup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// The finalizer record is a ConfigMap of the release (the chart's
// <webhook>-finalizers) that says which finalizer names nodes may carry on
// this release's account, without Helm's lookup: RecordChartKey is written
// by the chart (the names of the current render), RecordUsedKey by the
// webhook itself (every name it added). An apply of the chart never removes
// a key it did not write, so a name the webhook used survives a rename done
// through GitOps, and the removal Job (remove-finalizers) takes it off.
const (
	RecordChartKey = "finalizers"
	RecordUsedKey  = "used"
)

// ErrNoRecord is RecordFinalizer's error when the record does not exist.
var ErrNoRecord = errors.New("no finalizer record")

// StrandedError says that nodes carry a name this release's webhook added
// before and may no longer remove.
type StrandedError struct {
	Record, Name, Current string
	Nodes                 []string
}

func (e *StrandedError) Error() string {
	return fmt.Sprintf("finalizer %s, which this release's webhook added before (configmap %s), is on %d nodes (%s) and --finalizer=%s may not remove it: "+
		"set webhook.finalizer back to %s, or disable the webhook first (webhook.enabled=false: its removal Job takes %s off every node), then rename",
		e.Name, e.Record, len(e.Nodes), strings.Join(firstOf(e.Nodes, 5), ", "), e.Current, e.Name, e.Name)
}

func firstOf(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), "...")
}

// RecordNames splits a record's value into names.
func RecordNames(value string) []string {
	var out []string
	for _, n := range strings.Split(value, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// RecordFinalizer adds current to the record's used names before the
// webhook adds it to any node. A name used before that is neither current
// nor honoured (a custom name renamed away) is dropped when no node carries
// it; when nodes do, nothing is written and a StrandedError says which
// nodes and what to do: the webhook may not remove that name (its node
// policy allows only its own names), and starting would strand them.
func RecordFinalizer(ctx context.Context, cms typedcorev1.ConfigMapInterface, nodes metadata.Interface, name, current string, honoured []string) error {
	for try := 0; ; try++ {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ErrNoRecord
		}
		if err != nil {
			return fmt.Errorf("read the finalizer record %s: %w", name, err)
		}
		used := RecordNames(cm.Data[RecordUsedKey])
		keep := []string{}
		for _, u := range used {
			if u == current || slices.Contains(honoured, u) {
				keep = append(keep, u)
				continue
			}
			carriers, err := nodesCarrying(ctx, nodes, u)
			if err != nil {
				return err
			}
			if len(carriers) > 0 {
				return &StrandedError{Record: cm.Namespace + "/" + name, Name: u, Current: current, Nodes: carriers}
			}
		}
		if !slices.Contains(keep, current) {
			keep = append(keep, current)
		}
		if slices.Equal(keep, used) {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[RecordUsedKey] = strings.Join(keep, ",")
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: api.FieldManagerWebhook})
		if err == nil || !apierrors.IsConflict(err) || try >= 5 {
			if err != nil {
				return fmt.Errorf("write the finalizer record %s: %w", name, err)
			}
			return nil
		}
	}
}

// nodesCarrying lists the nodes that carry finalizer.
func nodesCarrying(ctx context.Context, client metadata.Interface, finalizer string) ([]string, error) {
	list, err := client.Resource(NodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var out []string
	for _, n := range list.Items {
		if slices.Contains(n.Finalizers, finalizer) {
			out = append(out, n.Name)
		}
	}
	return out, nil
}
