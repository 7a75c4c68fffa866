package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// VolumeAttachmentsName is the volumeattachments plugin's name.
const VolumeAttachmentsName = "volumeattachments"

// volumeAttachments deletes the node's VolumeAttachments and waits until they
// are gone, so CSI volumes are detached before the node object disappears and
// can attach elsewhere.
type volumeAttachments struct {
	client kubernetes.Interface
	poll   time.Duration
	log    *slog.Logger
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
	return &volumeAttachments{client: deps.Client, poll: poll, log: deps.Log}, nil
}

func (p *volumeAttachments) Name() string { return VolumeAttachmentsName }

func (p *volumeAttachments) ShouldRun(*corev1.Node) bool { return true }

func (p *volumeAttachments) Cleanup(ctx context.Context, node *corev1.Node) error {
	vas, err := p.attached(ctx, node)
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
		err := p.client.StorageV1().VolumeAttachments().Delete(ctx, va.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &va.UID}})
		if err = ignoreGone(err); err != nil {
			return fmt.Errorf("volumeattachments: delete %s: %w", va.Name, err)
		}
		p.log.Info("volumeattachment deleted", "node", node.Name, "volumeattachment", va.Name)
	}
	// Deletion completes when the attacher has detached (its finalizer goes).
	for {
		left, err := p.attached(ctx, node)
		if err != nil {
			return err
		}
		left = slices.DeleteFunc(left, func(va storagev1.VolumeAttachment) bool { return !uids[va.UID] })
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
		case <-time.After(p.poll):
		}
	}
}

// attached lists the VolumeAttachments of node that predate its deletion.
func (p *volumeAttachments) attached(ctx context.Context, node *corev1.Node) ([]storagev1.VolumeAttachment, error) {
	list, err := p.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("volumeattachments: list: %w", err)
	}
	var out []storagev1.VolumeAttachment
	for _, va := range list.Items {
		if va.Spec.NodeName == node.Name && createdBeforeDeletion(&va, node) {
			out = append(out, va)
		}
	}
	return out, nil
}
