package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/cleanup"
)

// LocalVolumesName is the local-volumes plugin's name.
const LocalVolumesName = "local-volumes"

// LocalVolumesAnnotation on a StorageClass opts its volumes in.
const LocalVolumesAnnotation = "infra.894.io/cleanup-local-volumes"

// localVolumes releases PersistentVolumes that only this node could serve
// (local disks): it deletes the bound claim and the volume, each with a UID
// precondition, so a StatefulSet re-creates the claim and it is provisioned on
// another node. It does not wait: the claim's protection finalizer holds
// until the node's pods are garbage-collected, which needs the node gone.
type localVolumes struct {
	client       kubernetes.Interface
	classes      []string
	deleteClaims bool
	log          *slog.Logger
}

type localVolumesSettings struct {
	// StorageClasses opt in by name, in addition to the annotation.
	StorageClasses []string `json:"storageClasses"`
	// DeleteClaims deletes the bound PersistentVolumeClaim too (default true).
	DeleteClaims *bool `json:"deleteClaims"`
}

func newLocalVolumes(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	var s localVolumesSettings
	if err := cleanup.DecodeSettings(LocalVolumesName, settings, &s); err != nil {
		return nil, err
	}
	for i, c := range s.StorageClasses {
		if c == "" {
			return nil, fmt.Errorf("%s.storageClasses[%d]: empty name", LocalVolumesName, i)
		}
	}
	p := &localVolumes{client: deps.Client, classes: s.StorageClasses, deleteClaims: true, log: deps.Log}
	if s.DeleteClaims != nil {
		p.deleteClaims = *s.DeleteClaims
	}
	return p, nil
}

func (p *localVolumes) Name() string { return LocalVolumesName }

func (p *localVolumes) ShouldRun(*corev1.Node) bool { return true }

func (p *localVolumes) Cleanup(ctx context.Context, node *corev1.Node) error {
	classes, err := p.optedIn(ctx)
	if err != nil || len(classes) == 0 {
		return err
	}
	pvs, err := p.client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("local-volumes: list persistentvolumes: %w", err)
	}
	var mine []corev1.PersistentVolume
	for _, pv := range pvs.Items {
		if classes[pv.Spec.StorageClassName] && pv.DeletionTimestamp == nil && createdBeforeDeletion(&pv, node) && PinnedOnlyTo(&pv, node) {
			mine = append(mine, pv)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	if cleanup.DryRun(ctx) {
		for _, pv := range mine {
			p.log.Info("dry run: would release persistentvolume", "node", node.Name, "persistentvolume", pv.Name, "claim", claimName(&pv))
		}
		return nil
	}
	if same, err := stillSameNode(ctx, p.client, node); err != nil || !same {
		if !same && err == nil {
			p.log.Info("node was re-created under the same name; leaving its volumes alone", "node", node.Name)
		}
		return err
	}
	for _, pv := range mine {
		if ref := pv.Spec.ClaimRef; p.deleteClaims && ref != nil && ref.UID != "" {
			err := p.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ref.UID}})
			if err = ignoreGone(err); err != nil {
				return fmt.Errorf("local-volumes: delete claim %s/%s of %s: %w", ref.Namespace, ref.Name, pv.Name, err)
			}
		}
		err := p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID}})
		if err = ignoreGone(err); err != nil {
			return fmt.Errorf("local-volumes: delete persistentvolume %s: %w", pv.Name, err)
		}
		p.log.Info("local persistentvolume released", "node", node.Name, "persistentvolume", pv.Name, "claim", claimName(&pv))
	}
	return nil
}

// optedIn is the set of StorageClasses whose volumes this plugin may release.
func (p *localVolumes) optedIn(ctx context.Context) (map[string]bool, error) {
	set := map[string]bool{}
	for _, c := range p.classes {
		set[c] = true
	}
	scs, err := p.client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("local-volumes: list storageclasses: %w", err)
	}
	for _, sc := range scs.Items {
		if sc.Annotations[LocalVolumesAnnotation] == "true" {
			set[sc.Name] = true
		}
	}
	return set, nil
}

// PinnedOnlyTo reports whether pv's node affinity admits node and no other
// node: every required term names only this node, by the
// kubernetes.io/hostname label or by metadata.name.
func PinnedOnlyTo(pv *corev1.PersistentVolume, node *corev1.Node) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
	if len(terms) == 0 {
		return false
	}
	hostname := node.Labels[corev1.LabelHostname]
	if hostname == "" {
		hostname = node.Name
	}
	for _, t := range terms {
		pinned := false
		for _, r := range t.MatchExpressions {
			if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn {
				if len(r.Values) != 1 || r.Values[0] != hostname {
					return false
				}
				pinned = true
			}
		}
		for _, r := range t.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn {
				if !slices.Equal(r.Values, []string{node.Name}) {
					return false
				}
				pinned = true
			}
		}
		if !pinned {
			return false // this term admits nodes by something else
		}
	}
	return true
}

func claimName(pv *corev1.PersistentVolume) string {
	if pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.Namespace + "/" + pv.Spec.ClaimRef.Name
}
