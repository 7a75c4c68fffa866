// Package clocktest drives a fake clock (k8s.io/utils/clock/testing) from
// a test: wait until the code under test waits on the clock, then step it.
// A rule that waits, retries or judges by age is proven in milliseconds
// this way, not in real time.
package clocktest

import (
	"runtime"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// awaitLimit bounds a wait in real time: the code under test reaches the
// clock within milliseconds; a minute only tells a stuck test apart on a
// loaded machine.
const awaitLimit = time.Minute

// Await returns once fc has at least n waiters (timers, tickers, After
// channels not yet fired): the goroutines under test are blocked on the
// clock, so what a step of it wakes is all that runs next.
func Await(t testing.TB, fc *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(awaitLimit)
	for fc.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the fake clock has %d waiters after %s, want %d: the code under test never waited on it", fc.Waiters(), awaitLimit, n)
		}
		runtime.Gosched()
	}
}

// Step moves fc by d, then waits until it has n waiters again: whatever
// the step woke ran and is waiting on the clock once more.
func Step(t testing.TB, fc *clocktesting.FakeClock, d time.Duration, n int) {
	t.Helper()
	fc.Step(d)
	Await(t, fc, n)
}

// Until returns once cond holds. A step that wakes work which ends
// without waiting on the clock again (a node released, nothing left to
// retry) is awaited on what that work does.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(awaitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, awaitLimit)
		}
		runtime.Gosched()
	}
}
