package watches

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListFunc and WatchFunc are what a ListWatch of the agent calls, with the
// watch's own selector already set.
type (
	ListFunc  = func(context.Context, metav1.ListOptions) (runtime.Object, error)
	WatchFunc = func(context.Context, metav1.ListOptions) (watch.Interface, error)
)

// Episodes is what one informer of the agent shares with every other: its
// watch requests ask for the long timeout (Lengthen), and a list or watch
// the API server refuses (its RBAC missing, the server restarting) is
// logged once per episode: a warning at the first refusal, a line when a
// watch is accepted again, and in between only debug lines. client-go's
// default handler logs every retry, about every 30 s once its backoff is
// at its cap: per agent, per watch, for as long as the cause lasts.
type Episodes struct {
	log *slog.Logger

	mu sync.Mutex
	// since is when the episode began; zero while the watch is healthy.
	since time.Time
	// refusals counts the refused tries of the episode.
	refusals int
}

// New returns the Episodes of one informer of example's type, logged on log
// (nil: nowhere) with attrs, which name what it watches.
func New(log *slog.Logger, example runtime.Object, attrs ...any) *Episodes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Episodes{log: log.With(append([]any{"watch", fmt.Sprintf("%T", example)}, attrs...)...)}
}

// ListWatch is the informer's ListWatch over list and watch: each watch
// request asks for the long timeout, and one the server accepts ends the
// episode.
func (e *Episodes) ListWatch(list ListFunc, watchFn WatchFunc) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: list,
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			Lengthen(&o)
			w, err := watchFn(ctx, o)
			if err == nil {
				e.accepted()
			}
			return w, err
		},
	}
}

// Attach makes Failed inf's watch error handler; then, when set, also.
func (e *Episodes) Attach(inf cache.SharedIndexInformer, also cache.WatchErrorHandlerWithContext) error {
	return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		e.Failed(err)
		if also != nil {
			also(ctx, r, err)
		}
	})
}

// Failed records a failed list or watch: the first refusal of an episode
// is logged as a warning, the rest at debug level. A watch that ended as
// watches do (closed, its resourceVersion too old) is no refusal.
func (e *Episodes) Failed(err error) {
	if !refusal(err) {
		return
	}
	e.mu.Lock()
	first := e.since.IsZero()
	if first {
		e.since = time.Now()
	}
	e.refusals++
	n := e.refusals
	e.mu.Unlock()
	if first {
		e.log.Warn("watch refused; retrying with backoff, logged again when it recovers", "err", err)
		return
	}
	e.log.Debug("watch still refused", "refusals", n, "err", err)
}

// accepted ends the episode, if any, once a watch request succeeded.
func (e *Episodes) accepted() {
	e.mu.Lock()
	since, n := e.since, e.refusals
	e.since, e.refusals = time.Time{}, 0
	e.mu.Unlock()
	if !since.IsZero() {
		e.log.Info("watch recovered", "refusals", n, "refused_seconds", time.Since(since).Seconds())
	}
}

// refusal reports whether err, from a reflector, is a failure rather than
// the normal end of a watch (client-go's DefaultWatchErrorHandler tells
// them apart the same way).
func refusal(err error) bool {
	return err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) &&
		!apierrors.IsResourceExpired(err) && !apierrors.IsGone(err)
}
