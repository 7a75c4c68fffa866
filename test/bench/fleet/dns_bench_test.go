//go:build e2e

package fleet_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
)

// dnsOutage stops DNS under the verified fleet of n nodes and follows the
// re-taint storm: every second's agent requests (audit log, from offset, the
// start of the steady window, whose rate is the baseline),
// the re-tainted nodes on a watch (the most at once), the time until the
// 10 % budget is used; after two more periods it brings DNS back and
// measures the time until every node is verified again and the request rate
// in the period after, with the requests of each phase by kind and the
// rounds the agents skipped as control-plane faults.
func dnsOutage(b *testing.B, f *fleet.Fleet, n int, offset int64) {
	ctx := b.Context()
	budget := max(n/10, 1)
	watcher, err := fleet.WatchRetainted(ctx, cp.Client)
	if err != nil {
		b.Fatal(err)
	}
	skippedBefore := skipped(b, f)
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
	skippedDown := skipped(b, f)
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
	time.Sleep(max(time.Until(restored.Add(2**period)), 0))
	skippedAfter := skipped(b, f)
	logf(b, "rounds the agents skipped as control-plane faults: %.0f while DNS was down, %.0f in the two periods after",
		skippedDown-skippedBefore, skippedAfter-skippedDown)
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
	phases, err := fleet.RequestsIn(cp.AuditLogPath(), offset, stopped, restored, restored.Add(*period), restored.Add(2**period))
	if err != nil {
		b.Fatal(err)
	}
	for i, name := range []string{"DNS down", "first period after", "second period after"} {
		logf(b, "agents' requests, %s: %s", name, kinds(phases[i]))
	}
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

// skipped is the fleet's node_ready_rounds_skipped_total, summed.
func skipped(b *testing.B, f *fleet.Fleet) float64 {
	var sum float64
	for _, a := range f.Agents() {
		mfs, err := a.Registry.Gather()
		if err != nil {
			b.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "node_ready_rounds_skipped_total" {
				sum += sumCounters(mf.GetMetric())
			}
		}
	}
	return sum
}

func sumCounters(ms []*dto.Metric) float64 {
	var sum float64
	for _, m := range ms {
		sum += m.GetCounter().GetValue()
	}
	return sum
}

// kinds lists counts by kind, most first.
func kinds(counts map[fleet.Request]int) string {
	reqs := make([]fleet.Request, 0, len(counts))
	for r := range counts {
		reqs = append(reqs, r)
	}
	slices.SortFunc(reqs, func(a, b fleet.Request) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a.String(), b.String()))
	})
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = fmt.Sprintf("%s %d", r, counts[r])
	}
	return strings.Join(parts, ", ")
}
