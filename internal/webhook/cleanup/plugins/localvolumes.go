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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// LocalVolumesName is the local-volumes plugin's name.
const LocalVolumesName = "local-volumes"

// LocalVolumesAnnotation on a StorageClass opts its volumes in.
const LocalVolumesAnnotation = api.LocalVolumesAnnotation

// localVolumes releases PersistentVolumes that only this node could serve
// (local disks): it deletes the bound claim and the volume, each with a UID
// precondition, so a StatefulSet re-creates the claim and it is provisioned on
// another node. It does not wait: the claim's protection finalizer holds
// until the node's pods are garbage-collected, which needs the node gone.
// It scans the shared PersistentVolume and StorageClass informers (one
// watch each for the process), never lists them per node.
type localVolumes struct {
	client       kubernetes.Interface
	pvs          cache.SharedIndexInformer
	scs          cache.SharedIndexInformer
	classes      []string
	deleteClaims bool
	recorder     events.EventRecorder
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
	pvs, err := deps.Informers.PersistentVolumes()
	if err != nil {
		return nil, fmt.Errorf("%s: watch persistentvolumes: %w", LocalVolumesName, err)
	}
	scs, err := deps.Informers.StorageClasses()
	if err != nil {
		return nil, fmt.Errorf("%s: watch storageclasses: %w", LocalVolumesName, err)
	}
	p := &localVolumes{client: deps.Client, pvs: pvs, scs: scs, classes: s.StorageClasses, deleteClaims: true, recorder: deps.Recorder, log: deps.Log}
	if s.DeleteClaims != nil {
		p.deleteClaims = *s.DeleteClaims
	}
	return p, nil
}

func (p *localVolumes) Name() string { return LocalVolumesName }

func (p *localVolumes) ShouldRun(*corev1.Node) bool { return true }

// Cleanup releases the opted-in volumes only node could serve. It finds
// them in the cache; just before deleting it re-reads the Node from the API
// server (one re-created under the same name is left alone) and the Nodes
// carrying its hostname (see leaveShared), and each volume is deleted only
// as the cache showed it: UID and resourceVersion preconditions.
func (p *localVolumes) Cleanup(ctx context.Context, node *corev1.Node) error {
	if err := cleanup.WaitSynced(ctx, "local-volumes", p.scs, p.pvs); err != nil {
		return err
	}
	classes := p.optedIn()
	if len(classes) == 0 {
		return nil
	}
	var mine []corev1.PersistentVolume
	for _, obj := range p.pvs.GetStore().List() {
		pv, ok := obj.(*corev1.PersistentVolume)
		if ok && classes[pv.Spec.StorageClassName] && pv.DeletionTimestamp == nil && createdBeforeDeletion(pv, node) && PinnedOnlyTo(pv, node) {
			mine = append(mine, *pv.DeepCopy())
		}
	}
	if len(mine) == 0 {
		return nil
	}
	slices.SortFunc(mine, func(a, b corev1.PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	if same, err := stillSameNode(ctx, p.client, node); err != nil || !same {
		if !same && err == nil {
			p.log.Info("node was re-created under the same name; leaving its volumes alone", "node", node.Name)
		}
		return err
	}
	mine, shared, err := p.leaveShared(ctx, node, mine)
	if err != nil {
		return err
	}
	var skip error // the plugin's outcome once mine is released
	if shared != nil {
		skip = shared
	}
	if cleanup.DryRun(ctx) {
		for _, pv := range mine {
			p.log.Info("dry run: would release persistentvolume", "node", node.Name, "persistentvolume", pv.Name, "claim", claimName(&pv))
		}
		return skip
	}
	for _, pv := range mine {
		if ref := pv.Spec.ClaimRef; p.deleteClaims && ref != nil && ref.UID != "" {
			err := p.client.CoreV1().PersistentVolumeClaims(ref.Namespace).Delete(ctx, ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ref.UID}})
			if err = ignoreGone(err); err != nil {
				return fmt.Errorf("local-volumes: delete claim %s/%s of %s: %w", ref.Namespace, ref.Name, pv.Name, err)
			}
		}
		if err := p.deleteVolume(ctx, node, &pv, classes); err != nil {
			return err
		}
	}
	return skip
}

// conflictRetries bounds how often one volume is judged again in an attempt
// after it changed under the delete.
const conflictRetries = 3

// deleteVolume deletes pv exactly as the cache showed it: UID and
// resourceVersion preconditions, so neither a newer volume of that name nor
// a change since (its affinity, class or claim) is deleted on an older
// judgement. When it changed — the PV controller marks a volume Released
// once its claim is gone — it waits for the watch to bring the new version,
// judges that by the same rules and tries again.
func (p *localVolumes) deleteVolume(ctx context.Context, node *corev1.Node, pv *corev1.PersistentVolume, classes map[string]bool) error {
	for range conflictRetries {
		err := p.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pv.UID, ResourceVersion: &pv.ResourceVersion}})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			p.log.Info("local persistentvolume released", "node", node.Name, "persistentvolume", pv.Name, "claim", claimName(pv))
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("local-volumes: delete persistentvolume %s: %w", pv.Name, err)
		}
		cur, err := p.newer(ctx, pv)
		if err != nil {
			return err
		}
		switch {
		case cur == nil || cur.UID != pv.UID || cur.DeletionTimestamp != nil:
			return nil // gone, replaced, or being deleted already
		case !classes[cur.Spec.StorageClassName] || !createdBeforeDeletion(cur, node) || !PinnedOnlyTo(cur, node) ||
			pinnedByHostname(cur) != pinnedByHostname(pv):
			p.log.Info("local persistentvolume changed and is no longer this node's alone; left alone", "node", node.Name, "persistentvolume", pv.Name)
			return nil
		}
		pv = cur
	}
	return fmt.Errorf("local-volumes: persistentvolume %s changed %d times while it was being released; judged again at the next attempt", pv.Name, conflictRetries)
}

// newer waits until the cache holds a version of pv other than pv's (nil:
// none, the volume is gone), at most newerWait or until ctx ends.
func (p *localVolumes) newer(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	var cur *corev1.PersistentVolume
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, newerWait, true, func(context.Context) (bool, error) {
		obj, ok, err := p.pvs.GetStore().GetByKey(pv.Name)
		if err != nil || !ok {
			cur = nil
			return err == nil, err
		}
		c, isPV := obj.(*corev1.PersistentVolume)
		if !isPV || c.ResourceVersion == pv.ResourceVersion {
			return false, nil
		}
		cur = c.DeepCopy()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("local-volumes: persistentvolume %s changed, and the new version did not arrive: %w", pv.Name, err)
	}
	return cur, nil
}

// newerWait bounds the wait for the watch to deliver a changed volume.
const newerWait = 5 * time.Second

// leaveShared drops from pvs the volumes pinned by kubernetes.io/hostname
// when another live Node (not being deleted) carries node's hostname — a
// node replaced under the same hostname, or two nodes sharing the label —
// since that node can serve them too. It reads the Nodes afresh, just before
// the deletes. A conflict is not a failure: the volumes are not this node's
// alone, so there is nothing of its own left to release and holding its
// deletion would wait for something nobody is going to do. It is a
// cleanup.Skip (the plugin's result: skipped, with the reason), a Warning
// Event on the deleted Node and a log line.
func (p *localVolumes) leaveShared(ctx context.Context, node *corev1.Node, pvs []corev1.PersistentVolume) ([]corev1.PersistentVolume, *cleanup.Skip, error) {
	if !slices.ContainsFunc(pvs, func(pv corev1.PersistentVolume) bool { return pinnedByHostname(&pv) }) {
		return pvs, nil, nil
	}
	host := hostnameOf(node)
	if len(validation.IsValidLabelValue(host)) > 0 {
		return pvs, nil, nil // no Node can carry it as a label
	}
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromValidatedSet(labels.Set{corev1.LabelHostname: host}).String()})
	if err != nil {
		return nil, nil, fmt.Errorf("local-volumes: list nodes with hostname %s: %w", host, err)
	}
	var live []*corev1.Node
	for i := range nodes.Items {
		if n := &nodes.Items[i]; n.UID != node.UID && n.DeletionTimestamp == nil {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return pvs, nil, nil
	}
	var keep []corev1.PersistentVolume
	var left []string
	for _, pv := range pvs {
		if pinnedByHostname(&pv) {
			left = append(left, pv.Name)
			continue
		}
		keep = append(keep, pv)
	}
	names := make([]string, len(live))
	for i, n := range live {
		names[i] = n.Name
	}
	p.log.Warn("local persistentvolumes left alone: another live node carries the hostname they are pinned to",
		"node", node.Name, "hostname", host, "live_nodes", names, "persistentvolumes", left)
	reason := fmt.Sprintf("left persistentvolumes %s alone: they are pinned to hostname %s, which live node %s also carries",
		strings.Join(left, ", "), host, strings.Join(names, ", "))
	if p.recorder != nil {
		p.recorder.Eventf(node, live[0], corev1.EventTypeWarning, api.EventLocalVolumesHostnameShared, "Cleanup", "%s", eventnote.Shorten(reason))
	}
	return keep, &cleanup.Skip{Reason: reason}, nil
}

// pinnedByHostname reports whether a required term of pv's node affinity
// selects by the kubernetes.io/hostname label (rather than metadata.name).
func pinnedByHostname(pv *corev1.PersistentVolume) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false
	}
	for _, t := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, r := range t.MatchExpressions {
			if r.Key == corev1.LabelHostname {
				return true
			}
		}
	}
	return false
}

// hostnameOf is node's kubernetes.io/hostname label, or its name without one.
func hostnameOf(node *corev1.Node) string {
	if h := node.Labels[corev1.LabelHostname]; h != "" {
		return h
	}
	return node.Name
}

// optedIn is the set of StorageClasses whose volumes this plugin may
// release: those configured, and those the cache shows annotated.
func (p *localVolumes) optedIn() map[string]bool {
	set := map[string]bool{}
	for _, c := range p.classes {
		set[c] = true
	}
	for _, obj := range p.scs.GetStore().List() {
		if sc, ok := obj.(*storagev1.StorageClass); ok && sc.Annotations[LocalVolumesAnnotation] == "true" {
			set[sc.Name] = true
		}
	}
	return set
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
	hostname := hostnameOf(node)
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
