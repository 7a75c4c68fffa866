package harness

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 250 ms until it holds or timeout passes, then
// fails tb with what cond said last.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	poll(tb, 250*time.Millisecond, timeout, what, cond)
}

// WaitFor is Eventually for a condition with nothing to say, polled every
// 100 ms: for what is quick to check and soon true.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	poll(tb, 100*time.Millisecond, timeout, what, func() (bool, string) { return cond(), "" })
}

func poll(tb testing.TB, interval, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	var last string
	err := wait.PollUntilContextTimeout(tb.Context(), interval, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		if last == "" {
			tb.Fatalf("%s: not within %s", what, timeout)
		}
		tb.Fatalf("%s: not within %s: %s", what, timeout, last)
	}
}

// WaitNode polls the Node name every 100 ms until cond holds for it and
// returns it; past timeout it fails tb with what was awaited and how the
// node last looked.
func (cp *ControlPlane) WaitNode(tb testing.TB, name string, timeout time.Duration, what string, cond func(*corev1.Node) bool) *corev1.Node {
	tb.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(tb.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		return cond(n), nil
	})
	if err != nil {
		if last == nil {
			tb.Fatalf("node %s: %s not reached within %s: never read", name, what, timeout)
		}
		tb.Fatalf("node %s: %s not reached within %s; last seen: taints %v labels %v annotations %v conditions %v", name, what, timeout,
			last.Spec.Taints, last.Labels, last.Annotations, last.Status.Conditions)
	}
	return last
}
