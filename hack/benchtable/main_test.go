package main

import (
	"strings"
	"testing"
	"time"
)

// TestEvaluateReadsTheBenchmarksOutput: result lines of go test -bench
// become the targets' rows, each met, missed or not measured.
func TestEvaluateReadsTheBenchmarksOutput(t *testing.T) {
	out := `goos: linux
BenchmarkJoinSlope-2   	       1	7934726765 ns/op	     12001 join-bytes-100	     56674 join-bytes-2000	        11.00 join-requests-100	        11.00 join-requests-2000	         6.809 join-server-ms-100	         6.787 join-server-ms-2000
BenchmarkFleet-2 1 1 ns/op 1.003 requests/node/round 0 etcd-reads 200 retainted-max 200 retaint-budget 1.05 after-recovery-rate-ratio
--- BENCH: BenchmarkFleet-2
BenchmarkFleetStatus-2 1 1 ns/op 3.5 status-s-median
BenchmarkAgentBesideKubelet-2 1 1 ns/op 0.16 requests-agent/kubelet 0.8 watches-agent/kubelet 0.1 cpu-agent/kubelet
PASS
`
	res := results{}
	res.read(strings.NewReader(out))
	rows := Evaluate(res, 2000, 25*time.Minute, 30*time.Minute)
	want := map[string]string{
		"the agent's cost":                    "missed",
		"its agent's requests":                "met",
		"the bytes its agent reads":           "missed",
		"API server time":                     "met",
		"first period after every re-taint":   "met",
		"requests per node per round":         "met",
		"re-tainted at once":                  "met",
		"status` over":                        "missed",
		"1 000 nodes deleted":                 "not measured",
		"`make bench-scale FLEET_NODES=2000`": "met",
	}
	for part, verdict := range want {
		found := false
		for _, r := range rows {
			if strings.Contains(r.Target, part) {
				found = true
				if r.Verdict != verdict {
					t.Errorf("%q: %s (%s), want %s", r.Target, r.Verdict, r.Measured, verdict)
				}
			}
		}
		if !found {
			t.Errorf("no row for %q in\n%s", part, Table(rows))
		}
	}
}
