package nodecleanup

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// trim is the node informer's transform. The watcher caches every Node of
// the cluster, so of each it keeps only what is read, and a Node of a
// cloud provider (some 60 labels, managedFields of kilobytes) shrinks to a
// few hundred bytes (issue 35, R12):
//
//   - name, UID, resourceVersion, creation and deletion timestamps and
//     finalizers: what back-fill and cleanup decide on and guard their
//     patches with;
//   - of the annotations, Config.SkipAnnotation (the bypass) and
//     Config.KeepAnnotations (read by others that share the informer);
//   - labels only while the node is being deleted: the cleanup plugins are
//     handed a node only then (nodeOf) and read its labels (the hook plugin
//     sends them all, portworx and local-volumes its hostname). A node
//     gets its deletionTimestamp in an update that carries every label, and
//     no label is read before.
//
// Everything else (managedFields, owner references, the other annotations
// and labels) is dropped.
func (c *Controller) trim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	kept := &metav1.PartialObjectMetadata{
		TypeMeta: m.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              m.Name,
			UID:               m.UID,
			ResourceVersion:   m.ResourceVersion,
			CreationTimestamp: m.CreationTimestamp,
			DeletionTimestamp: m.DeletionTimestamp,
			Finalizers:        m.Finalizers,
		},
	}
	for _, k := range append([]string{c.cfg.SkipAnnotation}, c.cfg.KeepAnnotations...) {
		if v, ok := m.Annotations[k]; ok && k != "" {
			if kept.Annotations == nil {
				kept.Annotations = map[string]string{}
			}
			kept.Annotations[k] = v
		}
	}
	if m.DeletionTimestamp != nil {
		kept.Labels = m.Labels
	}
	return kept, nil
}
