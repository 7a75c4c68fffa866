package agent

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

// Metrics are the agent's own series (the per-check ones belong to checks.Metrics).
type Metrics struct {
	verified          prometheus.Gauge
	failures          prometheus.Gauge
	taintOps          *prometheus.CounterVec
	timeToVerified    prometheus.Gauge
	retaintSuppressed prometheus.Counter
	retaintDeferred   *prometheus.CounterVec
	initialExhausted  prometheus.Counter
	continuous        *prometheus.GaugeVec
	skippedRounds     prometheus.Counter
	gateTimeouts      prometheus.Counter
	iterations        prometheus.Counter
	// Suspended is node_ready_suspended, set by the suspend switch.
	Suspended prometheus.Gauge
	observe   *observeMetrics
}

// NewMetrics registers the agent metrics on reg; it fails when one of them is
// already there.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		verified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_ready_verified",
			Help: "Whether the node is verified and free of the startup taint (1) or not (0).",
		}),
		failures: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_ready_consecutive_failures",
			Help: "Consecutive failed verification rounds.",
		}),
		taintOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_ready_taint_operations_total",
			Help: "Taint writes by operation (add: re-taint, remove: untaint) and result (success, conflict, error).",
		}, []string{"operation", "result"}),
		timeToVerified: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "node_ready_time_to_verified_seconds",
			Help: "Seconds from the node's creation to the first removal of its startup taint.",
		}),
		retaintSuppressed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_ready_retaint_suppressed_total",
			Help: "Re-taints refused because the fleet budget (--fleet-budget) was used up.",
		}),
		retaintDeferred: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "node_ready_retaint_deferred_total",
			Help: "Rounds whose re-taint waited, by reason (lease_held: another agent holds the re-taint Lease; lease_error: it cannot be read or written; lease_expired: the fleet count outlasted it; suspended: the operator's suspend switch is on; suspend_unreadable: the switch cannot be read).",
		}, []string{"reason"}),
		initialExhausted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_ready_initial_retries_exhausted_total",
			Help: "Times the start-up backoff ran out with the node still failing; it is then retried every period.",
		}),
		skippedRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_ready_rounds_skipped_total",
			Help: "Failed rounds not counted toward re-tainting because the API server could not serve (not ready, 5xx, 429).",
		}),
		gateTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_ready_gate_timeouts_total",
			Help: "DaemonSets the DaemonSet gate gave up waiting for (--gate.daemonsets.timeout).",
		}),
		iterations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "node_ready_loop_iterations_total",
			Help: "Iterations of the verification loop: a round of checks, or a look at the node that found nothing to verify (bypassed, waiting for a --wait-for-taints taint, node missing). Stalls while a bootstrap-only agent rests on its verified node.",
		}),
		continuous: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "node_check_continuous",
			Help: "Mode of each enabled check: 1 continuous (re-run every period once verified, can re-taint), 0 bootstrap (runs only until the first untaint).",
		}, []string{"check"}),
		Suspended: suspend.NewGauge(),
	}
	observe, err := newObserveMetrics(reg)
	if err != nil {
		return nil, err
	}
	m.observe = observe
	buildInfo := version.BuildInfo("node_ready_build_info", "Build of the running agent; always 1.")
	for _, c := range []prometheus.Collector{m.verified, m.failures, m.taintOps, m.timeToVerified, m.retaintSuppressed, m.retaintDeferred, m.initialExhausted, m.continuous, m.skippedRounds, m.gateTimeouts, m.iterations, m.Suspended, buildInfo} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("agent: register metrics: %w", err)
		}
	}
	for _, op := range []string{"add", "remove"} {
		for _, res := range []string{"success", "conflict", "error"} {
			m.taintOps.WithLabelValues(op, res)
		}
	}
	for _, r := range deferReasons {
		m.retaintDeferred.WithLabelValues(r)
	}
	return m, nil
}
