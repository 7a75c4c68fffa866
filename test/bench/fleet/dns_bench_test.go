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

// dnsOutages runs -fleet.dns-outages DNS outages one after another (each
// after the fleet is steady again: every node verified, then three quiet
// periods) and reports the medians of their recovery figures: the request
// rate in the first period after every re-tainted node was untainted,
// against the steady rate before the outage.
func dnsOutages(b *testing.B, f *fleet.Fleet, n int, offset int64) {
	var ratios, recoveries []float64
	for i := range *outages {
		if i > 0 {
			waitVerified(b, n, 10**period)
			time.Sleep(3 * *period)
		}
		o := dnsOutage(b, f, n, offset)
		logf(b, "outage %d of %d: every re-taint undone %.0f s after DNS returned; the first period after that carried %.2f× the steady rate",
			i+1, *outages, o.recovered.Seconds(), o.afterRecovery)
		ratios, recoveries = append(ratios, o.afterRecovery), append(recoveries, o.recovered.Seconds())
	}
	logf(b, "%d outages: the first period after every re-taint was undone carried %v × the steady rate (median %.2f); recovered %v s after DNS returned (median %.0f)",
		*outages, ratios, median(slices.Clone(ratios)), recoveries, median(slices.Clone(recoveries)))
	b.ReportMetric(median(ratios), "after-recovery-rate-ratio")
	b.ReportMetric(median(recoveries), "s-to-recover-median")
}

// outageResult is what one DNS outage measured of the recovery.
type outageResult struct {
	// recovered is the time from DNS back to every re-taint undone.
	recovered time.Duration
	// afterRecovery is the agents' request rate in the period after that,
	// over the steady rate before the outage.
	afterRecovery float64
}

// dnsOutage stops DNS under the verified fleet of n nodes and follows the
// re-taint storm: every second's agent requests (audit log, from offset, the
// start of the steady window, whose rate is the baseline),
// the re-tainted nodes on a watch (the most at once), the time until the
// 10 % budget is used; after two more periods it brings DNS back and
// measures the time until every node is verified again and the request rate
// in the period after, with the requests of each phase by kind and the
// rounds the agents skipped as control-plane faults, and the rate in the
// first period after every re-taint was undone.
func dnsOutage(b *testing.B, f *fleet.Fleet, n int, offset int64) outageResult {
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
	recoveredAt := restored.Add(recovered)
	if recovered == 0 {
		b.Errorf("re-tainted nodes left %s after DNS returned", 10**period)
		recoveredAt = time.Now()
	}
	time.Sleep(max(time.Until(restored.Add(2**period)), time.Until(recoveredAt.Add(*period+2*time.Second)), 0))
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
	afterRecovery, afterRecoveryPeak := rate(recoveredAt, recoveredAt.Add(*period))
	logf(b, "agents' requests per second (mean, peak of any second): steady %.1f, %.0f; DNS down %.1f, %.0f; first period after %.1f, %.0f; second period after %.1f, %.0f; first period after every re-taint was undone %.1f, %.0f (%.2f× steady)",
		before, beforePeak, during, duringPeak, after1, after1Peak, after2, after2Peak, afterRecovery, afterRecoveryPeak, afterRecovery/before)
	phases, err := fleet.RequestsIn(cp.AuditLogPath(), offset, stopped, restored, restored.Add(*period), restored.Add(2**period))
	if err != nil {
		b.Fatal(err)
	}
	for i, name := range []string{"DNS down", "first period after", "second period after"} {
		logf(b, "agents' requests, %s: %s", name, kinds(phases[i]))
	}
	steadyKinds, err := fleet.RequestsIn(cp.AuditLogPath(), offset, stopped.Add(-*period), stopped, recoveredAt, recoveredAt.Add(*period))
	if err != nil {
		b.Fatal(err)
	}
	logf(b, "agents' requests, the period before DNS stopped: %s; the first period after every re-taint was undone: %s", kinds(steadyKinds[0]), kinds(steadyKinds[2]))
	logf(b, "re-tainted at most %d nodes at once (budget %d; the Node watch listed again %d times after the API server closed it); every re-taint undone %.0f s after DNS returned",
		most, budget, relists, recovered.Seconds())
	b.ReportMetric(float64(most), "retainted-max")
	b.ReportMetric(float64(budget), "retaint-budget")
	b.ReportMetric(filled.Seconds(), "s-to-budget")
	b.ReportMetric(duringPeak, "outage-peak-req/s")
	b.ReportMetric(recovered.Seconds(), "s-to-recover")
	if most > budget {
		b.Errorf("%d nodes re-tainted at once, budget %d", most, budget)
	}
	return outageResult{recovered: recovered, afterRecovery: afterRecovery / before}
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
