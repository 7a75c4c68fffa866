package remediate

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
)

// Every scan is timed once, under the same result as it is counted: a scan
// that judges nodes as ok, one the API server does not answer as
// api_unreachable.
func TestScanDurationObservedOncePerScan(t *testing.T) {
	f := newFixture(t, PolicyReport, []*corev1.Node{node("stuck", 10*time.Hour, taint(startup))})
	if n := testutil.CollectAndCount(f.c.scanSeconds, "node_remediation_scan_duration_seconds"); n != 2 {
		t.Fatalf("%d histogram series before the first scan, want 2 (ok, api_unreachable)", n)
	}
	f.scan(f.cached("stuck")...)
	f.scan(f.cached("stuck")...)
	f.probeErr = errors.New("connection refused")
	f.scan(f.cached("stuck")...)

	for result, want := range map[string]uint64{scanOK: 2, scanUnreachable: 1} {
		if got := scanSamples(t, f.c, result); got != want {
			t.Errorf("scan duration samples{result=%q} = %d, want %d", result, got, want)
		}
		if got := testutilScans(f, result); got != float64(want) {
			t.Errorf("scans_total{result=%q} = %v, want %d", result, got, want)
		}
	}
}

// scanSamples is the scan duration histogram's sample count for result.
func scanSamples(t *testing.T, c *Controller, result string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := c.scanSeconds.WithLabelValues(result).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// BenchmarkPlan10000 plans over 10 000 cached unverified nodes, none due
// yet: the work of a scan at fleet scale when nothing is to be done.
// go test -run '^$' -bench Plan10000 -cpuprofile cpu.out ./internal/webhook/remediate/
func BenchmarkPlan10000(b *testing.B) {
	c := testController(b, PolicyReplace, "1", "10%", false)
	nodes := make([]*corev1.Node, 10000)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("node-%d", i), time.Minute, taint(startup), label("node-ready/verified", "false"))
	}
	watched(c, nodes...)
	for b.Loop() {
		c.plan(nodes, len(nodes), t0)
	}
}
