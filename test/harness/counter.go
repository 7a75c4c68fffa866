package harness

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Counter names a counter the project's binaries export: the samples of
// Name whose labels contain every one of Match, summed.
type Counter struct {
	// Name is the metric's name, such as node_ready_loop_iterations_total.
	Name string
	// Match are label pairs (`result="ok"`) a sample must carry to count.
	Match []string
}

// counterWait is how long WaitCounter waits for the counters to move: far
// more than the few periods tests wait for, so only a stuck loop reaches it.
const counterWait = 60 * time.Second

// WaitCounter waits until c on d has grown by n from its value at the call.
// It is the positive signal a test anchors "nothing happened" on: the loop
// behind c (the agent's rounds, the webhook's remediation scans) ran n more
// times, so it had every chance to do what it must not. While waiting, hold
// (when not nil) must keep returning true; the first false fails tb at once
// with what hold said and what (the reason of the wait).
func (d *Daemon) WaitCounter(tb testing.TB, c Counter, n int, what string, hold func() (bool, string)) {
	tb.Helper()
	WaitCounters(tb, []*Daemon{d}, c, n, what, hold)
}

// WaitCounters is WaitCounter for several daemons at once (every agent of
// a fleet): it returns when c has grown by n on each of them.
func WaitCounters(tb testing.TB, daemons []*Daemon, c Counter, n int, what string, hold func() (bool, string)) {
	tb.Helper()
	urls := make([]string, len(daemons))
	for i, d := range daemons {
		urls[i] = d.URL("/metrics")
	}
	WaitCountersAt(tb, urls, c, n, what, hold)
}

// WaitCountersAt is WaitCounters for the /metrics URLs of processes the
// harness did not start (the chart's pods, at their pod IPs).
func WaitCountersAt(tb testing.TB, urls []string, c Counter, n int, what string, hold func() (bool, string)) {
	tb.Helper()
	// A process that does not serve its metrics yet (just started) has
	// counted nothing: its base is 0.
	base := make([]float64, len(urls))
	for i, url := range urls {
		base[i], _ = ScrapeMetric(url, c.Name, c.Match...)
	}
	Eventually(tb, counterWait, fmt.Sprintf("%s: %s grown by %d", what, c.Name, n), func() (bool, string) {
		if hold != nil {
			if ok, why := hold(); !ok {
				tb.Fatalf("%s: %s", what, why)
			}
		}
		var behind []string
		for i, url := range urls {
			v, err := ScrapeMetric(url, c.Name, c.Match...)
			if err != nil {
				behind = append(behind, fmt.Sprintf("%s: %v", url, err))
			} else if v < base[i]+float64(n) {
				behind = append(behind, fmt.Sprintf("%s at %v from %v", url, v, base[i]))
			}
		}
		return len(behind) == 0, strings.Join(behind, "; ")
	})
}
