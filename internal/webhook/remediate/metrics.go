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
)

var blockedReasons = []string{blockedFleet, blockedMax, blockedProtected, blockedBreaker}

// metrics are the controller's gauges and counters, on the registry New is given.
type metrics struct {
	overdue     prometheus.Gauge
	replacing   prometheus.Gauge
	blocked     *prometheus.GaugeVec
	actions     *prometheus.CounterVec
	scans       *prometheus.CounterVec
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
			Help: "Overdue nodes not replaced in the last scan, by reason (fleet_budget, max_replacing, protected, circuit_breaker).",
		}, []string{"reason"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_actions_total",
			Help: "Remediation actions by action (report, dry_run, delete_nodeclaim, delete_node, unmark) and result (success, error).",
		}, []string{"action", "result"}),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_remediation_scans_total",
			Help: "Remediation scans by result: ok (nodes judged), api_unreachable (the API server did not answer; nothing judged, and every node's time restarts when it answers again).",
		}, []string{"result"}),
		circuitOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_remediation_circuit_open",
			Help: "1 while the circuit breaker stops replacements because too many new nodes never verified (--remediation-breaker-threshold), else 0.",
		}),
	}
	for _, reason := range blockedReasons {
		m.blocked.WithLabelValues(reason)
	}
	for _, result := range []string{"ok", "api_unreachable"} {
		m.scans.WithLabelValues(result)
	}
	for _, col := range []prometheus.Collector{m.overdue, m.replacing, m.blocked, m.actions, m.scans, m.circuitOpen} {
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

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
