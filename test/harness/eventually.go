package harness

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Eventually polls cond every 250 ms until it holds or timeout passes, then
// fails tb with what cond said last.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	var last string
	err := wait.PollUntilContextTimeout(tb.Context(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		tb.Fatalf("%s: not within %s: %s", what, timeout, last)
	}
}
