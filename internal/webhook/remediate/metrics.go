package remediate

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Blocked reasons (the reason label of node_remediation_blocked_nodes).
const (
	blockedFleet     = "fleet_budget"
	blockedMax       = "max_replacing"
	blockedProtected = "protected"
	blockedBreaker   = "circuit_breaker"
	// blockedInService: the node verified once and serves workloads; only
	// reported unless --remediation-replace-retainted.
	blockedInService = "in_service"
	// blockedWorkloads: on the fresh read the node runs pods other than
	// DaemonSet and mirror pods.
	blockedWorkloads = "runs_workloads"
	// blockedNoDrain: a node in service with no Karpenter NodeClaim to drain
	// it; a bare Node delete would evict nothing.
	blockedNoDrain = "no_drain_path"
)

var blockedReasons = []string{blockedFleet, blockedMax, blockedProtected, blockedBreaker, blockedInService, blockedWorkloads, blockedNoDrain,
	blockedSuspended, blockedSuspendUnreadable}

// Scan results (the result label of node_remediation_scans_total and
// node_remediation_scan_duration_seconds).
const (
	scanOK          = "ok"
	scanUnreachable = "api_unreachable"
)

// scanBuckets resolve a scan's duration from 1 ms (a few nodes) to 10 s,
// with a bound at 1 s: the target for a scan over 10 000 cached nodes.
var scanBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// metrics are the controller's gauges and counters, on the registry New is given.
type metrics struct {
	overdue     prometheus.Gauge
	replacing   prometheus.Gauge
	blocked     *prometheus.GaugeVec
	actions     *prometheus.CounterVec
	scans       *prometheus.CounterVec
	scanSeconds *prometheus.HistogramVec
	circuitOpen prometheus.Gauge
}

// newMetrics creates the metrics, with every label value that exists
// present from the start, and registers them on reg.
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		overdue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_overdue_nodes",
			Help: "Nodes carrying the startup or unhealthy taint past --unverified-deadline that are not being replaced.",
		}),
		replacing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_replacing_nodes",
			Help: "Unverified nodes still present that remediation marked as replacing or that are being deleted (counted against --max-replacing).",
		}),
		blocked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_remediation_blocked_nodes",
			Help: "Overdue nodes not replaced in the last scan, by reason (fleet_budget, max_replacing, protected, circuit_breaker, in_service, runs_workloads, no_drain_path).",
		}, []string{"reason"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_actions_total",
			Help: "Remediation actions by action (report, dry_run, delete_nodeclaim, delete_node, unmark) and result (success, error).",
		}, []string{"action", "result"}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_scans_total",
			Help: "Remediation scans by result: ok (nodes judged), api_unreachable (the API server did not answer; nothing judged, and every node's time restarts when it answers again).",
		}, []string{"result"}),
		scanSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "node_remediation_scan_duration_seconds",
			Help:    "How long one remediation scan took (the API server check, planning over the cached unverified nodes, and acting), by result as node_remediation_scans_total.",
			Buckets: scanBuckets,
		}, []string{"result"}),
		circuitOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_circuit_open",
			Help: "Node pools whose circuit breaker stops replacements because too many of their new nodes never verified (--remediation-breaker-threshold); 0 when none.",
		}),
	}
	for _, reason := range blockedReasons {
		m.blocked.WithLabelValues(reason)
	}
	for _, result := range []string{scanOK, scanUnreachable} {
		m.scans.WithLabelValues(result)
		m.scanSeconds.WithLabelValues(result)
	}
	for _, col := range []prometheus.Collector{m.overdue, m.replacing, m.blocked, m.actions, m.scans, m.scanSeconds, m.circuitOpen} {
		if err := reg.Register(col); err != nil {
			return metrics{}, fmt.Errorf("remediate: register metrics: %w", err)
		}
	}
	return m, nil
}

// zero resets the gauges: a former leader's would keep an alert firing.
func (m metrics) zero() {
	m.overdue.Set(0)
	m.replacing.Set(0)
	m.circuitOpen.Set(0)
	for _, reason := range blockedReasons {
		m.blocked.WithLabelValues(reason).Set(0)
	}
}
