package harness

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// UntaintedAfter waits on w, a watch of one Node, for an event that shows
// the node without a taint of key, and returns the time since start: the
// start-to-untaint figure of the benchmarks.
func UntaintedAfter(w watch.Interface, key string, start time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, fmt.Errorf("watch closed")
			}
			n, isNode := ev.Object.(*corev1.Node)
			if isNode && ev.Type != watch.Deleted && !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key }) {
				return time.Since(start), nil
			}
		case <-deadline:
			return 0, fmt.Errorf("taint %s not removed within %s", key, timeout)
		}
	}
}
