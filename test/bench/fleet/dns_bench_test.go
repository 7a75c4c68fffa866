//go:build e2e

package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
)

// dnsOutage stops DNS under the verified fleet of n nodes and follows the
// re-taint storm: every second's agent requests (audit log, from offset, the
// start of the steady window, whose rate is the baseline),
// the re-tainted nodes on a watch (the most at once), the time until the
// 10 % budget is used; after two more periods it brings DNS back and
// measures the time until every node is verified again and the request rate
// in the period after.
func dnsOutage(b *testing.B, n int, offset int64) {
	ctx := b.Context()
	budget := max(n/10, 1)
	watcher, err := fleet.WatchRetainted(ctx, cp.Client)
	if err != nil {
		b.Fatal(err)
	}
	stopped := time.Now()
	if err := cp.StopDNS(); err != nil {
		b.Fatal(err)
	}
	dnsBack := false
	defer func() {
		if !dnsBack {
			_ = cp.StartDNS(context.Background())
		}
	}()
	// The budget fills once every agent has failed --retaint-threshold (3)
	// rounds; allow ten periods.
	var filled time.Duration
	for deadline := stopped.Add(10 * *period); time.Now().Before(deadline); time.Sleep(time.Second) {
		if watcher.Now() >= budget {
			filled = time.Since(stopped)
			break
		}
	}
	if filled == 0 {
		logf(b, "budget %d not used within %s: %d nodes re-tainted", budget, 10**period, watcher.Now())
	} else {
		logf(b, "budget of %d nodes used %.0f s after DNS stopped", budget, filled.Seconds())
	}
	time.Sleep(2 * *period)
	if err := cp.StartDNS(ctx); err != nil {
		b.Fatal(err)
	}
	dnsBack = true
	restored := time.Now()
	var recovered time.Duration
	for deadline := restored.Add(10 * *period); time.Now().Before(deadline); time.Sleep(time.Second) {
		if watcher.Now() == 0 {
			recovered = time.Since(restored)
			break
		}
	}
	most, relists, err := watcher.Stop()
	if err != nil {
		b.Errorf("following the re-tainted nodes stopped early: %v", err)
	}
	time.Sleep(2 * *period)
	perSecond, _, err := fleet.PerSecond(cp.AuditLogPath(), offset)
	if err != nil {
		b.Fatal(err)
	}
	rate := func(from, to time.Time) (mean, peak float64) {
		var sum int
		for s := from.Unix(); s < to.Unix(); s++ {
			sum += perSecond[s]
			peak = max(peak, float64(perSecond[s]))
		}
		return float64(sum) / to.Sub(from).Seconds(), peak
	}
	before, beforePeak := rate(stopped.Add(-*window), stopped)
	during, duringPeak := rate(stopped, restored)
	after1, after1Peak := rate(restored, restored.Add(*period))
	after2, after2Peak := rate(restored.Add(*period), restored.Add(2**period))
	logf(b, "agents' requests per second (mean, peak of any second): steady %.1f, %.0f; DNS down %.1f, %.0f; first period after %.1f, %.0f; second period after %.1f, %.0f",
		before, beforePeak, during, duringPeak, after1, after1Peak, after2, after2Peak)
	logf(b, "re-tainted at most %d nodes at once (budget %d; the Node watch listed again %d times after the API server closed it); every re-taint undone %.0f s after DNS returned",
		most, budget, relists, recovered.Seconds())
	b.ReportMetric(float64(most), "retainted-max")
	b.ReportMetric(filled.Seconds(), "s-to-budget")
	b.ReportMetric(duringPeak, "outage-peak-req/s")
	b.ReportMetric(recovered.Seconds(), "s-to-recover")
	if most > budget {
		b.Errorf("%d nodes re-tainted at once, budget %d", most, budget)
	}
}
