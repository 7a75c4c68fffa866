package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// VolumeAttachmentsName is the volumeattachments plugin's name.
const VolumeAttachmentsName = "volumeattachments"

// volumeAttachments deletes the node's VolumeAttachments and waits until they
// are gone, so CSI volumes are detached before the node object disappears and
// can attach elsewhere. It finds them, and sees them go, in the shared
// VolumeAttachment informer (one watch for the process), never by listing:
// a mass deletion costs the API server a delete per attachment and a GET of
// each node that has any, not a list of every attachment per node and poll.
type volumeAttachments struct {
	client    kubernetes.Interface
	informers *cleanup.Informers
	informer  cache.SharedIndexInformer
	poll      time.Duration
	log       *slog.Logger
}

type volumeAttachmentsSettings struct {
	// PollInterval is how often it checks whether they are gone.
	PollInterval string `json:"pollInterval"`
}

func newVolumeAttachments(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	s := volumeAttachmentsSettings{PollInterval: "1s"}
	if err := cleanup.DecodeSettings(VolumeAttachmentsName, settings, &s); err != nil {
		return nil, err
	}
	poll, err := time.ParseDuration(s.PollInterval)
	if err != nil || poll <= 0 {
		return nil, fmt.Errorf("%s.pollInterval: want a positive duration like 1s, got %q", VolumeAttachmentsName, s.PollInterval)
	}
	inf, err := deps.Informers.VolumeAttachments()
	if err != nil {
		return nil, fmt.Errorf("%s: watch volumeattachments: %w", VolumeAttachmentsName, err)
	}
	return &volumeAttachments{client: deps.Client, informers: deps.Informers, informer: inf, poll: poll, log: deps.Log}, nil
}

func (p *volumeAttachments) Name() string { return VolumeAttachmentsName }

func (p *volumeAttachments) ShouldRun(*corev1.Node) bool { return true }

func (p *volumeAttachments) Cleanup(ctx context.Context, node *corev1.Node) error {
	if err := cleanup.WaitSynced(ctx, "volumeattachments", p.informer); err != nil {
		return err
	}
	vas, err := p.attached(node)
	if err != nil || len(vas) == 0 {
		return err
	}
	if cleanup.DryRun(ctx) {
		for _, va := range vas {
			p.log.Info("dry run: would delete volumeattachment", "node", node.Name, "volumeattachment", va.Name)
		}
		return nil
	}
	if same, err := stillSameNode(ctx, p.client, node); err != nil || !same {
		if !same && err == nil {
			p.log.Info("node was re-created under the same name; leaving its volumeattachments alone", "node", node.Name)
		}
		return err
	}
	uids := map[types.UID]bool{}
	for _, va := range vas {
		uids[va.UID] = true
		if va.DeletionTimestamp != nil {
			continue // deleted already (an earlier attempt): only wait
		}
		// The UID precondition: exactly the object judged here (its spec,
		// and so its node, cannot change), not a newer one of that name.
		err := p.client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &va.UID}})
		if err = ignoreGone(err); err != nil {
			return fmt.Errorf("volumeattachments: delete %s: %w", va.Name, err)
		}
		p.log.Info("volumeattachment deleted", "node", node.Name, "volumeattachment", va.Name)
	}
	// Deletion completes when the attacher has detached (its finalizer
	// goes); the watch tells: the cache is looked at again when it changes,
	// and every poll at the latest.
	for {
		changed := p.informers.Changed(p.informer)
		left, err := p.attached(node)
		if err != nil {
			return err
		}
		left = slices.DeleteFunc(left, func(va *storagev1.VolumeAttachment) bool { return !uids[va.UID] })
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			names := make([]string, len(left))
			for i, va := range left {
				names[i] = va.Name
			}
			return fmt.Errorf("volumeattachments: %d still present (%v): %w", len(left), names, ctx.Err())
		case <-changed:
		case <-time.After(p.poll):
		}
	}
}

// attached is the VolumeAttachments of node in the cache that predate its
// deletion, by name.
func (p *volumeAttachments) attached(node *corev1.Node) ([]*storagev1.VolumeAttachment, error) {
	objs, err := p.informer.GetIndexer().ByIndex(cleanup.VolumeAttachmentsByNode, node.Name)
	if err != nil {
		return nil, fmt.Errorf("volumeattachments: read the cache: %w", err)
	}
	var out []*storagev1.VolumeAttachment
	for _, obj := range objs {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.NodeName == node.Name && createdBeforeDeletion(va, node) {
			out = append(out, va)
		}
	}
	slices.SortFunc(out, func(a, b *storagev1.VolumeAttachment) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
