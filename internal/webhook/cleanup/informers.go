package cleanup

import (
	"context"
	"fmt"
	"sync"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// VolumeAttachmentsByNode is the index of the VolumeAttachments informer:
// spec.nodeName.
const VolumeAttachmentsByNode = "spec.nodeName"

// Informers are the shared informers the storage plugins read through
// instead of listing every object from the API server at each attempt: one
// watch per resource for the whole process, opened the first time a plugin
// that reads the resource is built (so nothing is watched that no enabled
// plugin reads), kept across configuration reloads, closed by Stop. At a
// mass deletion the API server then serves the initial list once and the
// watches' events, whatever the number of nodes, workers or retries.
//
// The cache lags the API server by a watch event's delay. Plugins therefore
// scan the cache but keep every gate that needs the present state fresh:
// deletes carry UID (and, where the object is mutable, resourceVersion)
// preconditions, and the Node reads before a delete go to the API server.
type Informers struct {
	factory informers.SharedInformerFactory

	mu      sync.Mutex
	stop    chan struct{}
	stopped bool
	changes map[cache.SharedIndexInformer]*changes
}

// changes wakes whoever waits for an informer's cache to change.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

// next is closed at the informer's next change.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

func (c *changes) signal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

// NewInformers returns informers on client; none is started until a plugin
// asks for it.
func NewInformers(client kubernetes.Interface) *Informers {
	return &Informers{
		factory: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(dropManagedFields)),
		stop:    make(chan struct{}),
		changes: map[cache.SharedIndexInformer]*changes{},
	}
}

// VolumeAttachments is the shared VolumeAttachment informer, indexed by
// VolumeAttachmentsByNode, started if it was not.
func (i *Informers) VolumeAttachments() (cache.SharedIndexInformer, error) {
	return i.start(func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Storage().V1().VolumeAttachments().Informer()
	}, cache.Indexers{VolumeAttachmentsByNode: func(obj any) ([]string, error) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok {
			return []string{va.Spec.NodeName}, nil
		}
		return nil, nil
	}})
}

// PersistentVolumes is the shared PersistentVolume informer, started if it was not.
func (i *Informers) PersistentVolumes() (cache.SharedIndexInformer, error) {
	return i.start(func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Core().V1().PersistentVolumes().Informer()
	}, nil)
}

// StorageClasses is the shared StorageClass informer, started if it was not.
func (i *Informers) StorageClasses() (cache.SharedIndexInformer, error) {
	return i.start(func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
		return f.Storage().V1().StorageClasses().Informer()
	}, nil)
}

// start gets an informer of the factory (one per type), adds indexers it
// lacks and starts it unless it runs already.
func (i *Informers) start(get func(informers.SharedInformerFactory) cache.SharedIndexInformer, indexers cache.Indexers) (cache.SharedIndexInformer, error) {
	if i == nil {
		return nil, fmt.Errorf("no shared informers")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stopped {
		return nil, fmt.Errorf("shared informers stopped")
	}
	inf := get(i.factory)
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := inf.GetIndexer().GetIndexers()[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) > 0 {
		if err := inf.AddIndexers(missing); err != nil {
			return nil, fmt.Errorf("add indexers: %w", err)
		}
	}
	if i.changes[inf] == nil {
		c := &changes{ch: make(chan struct{})}
		signal := func(any) { c.signal() }
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: signal, UpdateFunc: func(_, obj any) { signal(obj) }, DeleteFunc: signal,
		}); err != nil {
			return nil, fmt.Errorf("watch changes: %w", err)
		}
		i.changes[inf] = c
	}
	i.factory.Start(i.stop) // starts only the informers not running yet
	return inf, nil
}

// Changed is closed at the next change of inf's cache (an object added,
// updated or deleted), so a plugin waiting for objects to go wakes when the
// watch delivers their deletion rather than at its next poll. Take it
// before reading the cache, so no change between the two is missed.
func (i *Informers) Changed(inf cache.SharedIndexInformer) <-chan struct{} {
	i.mu.Lock()
	c := i.changes[inf]
	i.mu.Unlock()
	if c == nil {
		return nil // never closes: the caller's poll decides
	}
	return c.next()
}

// Stop closes every watch and waits for the informers to end.
func (i *Informers) Stop() {
	if i == nil {
		return
	}
	i.mu.Lock()
	if i.stopped {
		i.mu.Unlock()
		return
	}
	i.stopped = true
	close(i.stop)
	i.mu.Unlock()
	i.factory.Shutdown()
}

// WaitSynced waits until every informer of infs has its first list, or ctx
// ends (an error naming what).
func WaitSynced(ctx context.Context, what string, infs ...cache.SharedIndexInformer) error {
	synced := make([]cache.InformerSynced, len(infs))
	all := true
	for n, inf := range infs {
		synced[n] = inf.HasSynced
		all = all && inf.HasSynced()
	}
	if all {
		return nil
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("%s: cache not filled yet: %w", what, context.Cause(ctx))
	}
	return nil
}

// dropManagedFields keeps the cache small: no plugin reads managedFields.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
