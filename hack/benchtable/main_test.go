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
	for _, r := range rows {
		if r.Verdict == "not measured" && r.Measured != "—" {
			t.Errorf("%q: not measured, but says %q", r.Target, r.Measured)
		}
	}
	for part, verdict := range want {
		if part == "the agent's cost" {
			// The real-node columns and the fleet's CPU.
			for _, r := range rows {
				if strings.Contains(r.Target, part) && !strings.Contains(r.Measured, "requests 16 %, watches 80 %") {
					t.Errorf("%q: %s, want the real-node columns", r.Target, r.Measured)
				}
			}
		}
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

// TestAgentCostRow: without the real-node benchmark's output the row
// still reads the fleet's CPU and says how to measure the rest; heap and
// CPU of the real-node benchmark (noise on a few nodes) never decide it.
func TestAgentCostRow(t *testing.T) {
	row := func(out string) Row {
		res := results{}
		res.read(strings.NewReader(out))
		for _, r := range Evaluate(res, 2000, 0, 30*time.Minute) {
			if strings.HasPrefix(r.Target, "the agent's cost") {
				return r
			}
		}
		t.Fatal("no row for the agent's cost")
		return Row{}
	}
	if r := row("BenchmarkFleet-2 1 1 ns/op 14.71 apiserver-cpu-%-of-heartbeats\n"); r.Verdict != "not measured" ||
		!strings.Contains(r.Measured, "CPU 15 %") || !strings.Contains(r.Measured, "make bench-beside") {
		t.Errorf("fleet only: %s (%s), want not measured, with the fleet's CPU and how to measure the rest", r.Verdict, r.Measured)
	}
	if r := row("BenchmarkFleet-2 1 1 ns/op 14.71 apiserver-cpu-%-of-heartbeats\nBenchmarkAgentBesideKubelet-2 1 1 ns/op 0.17 requests-agent/kubelet\n"); r.Verdict != "met" ||
		r.Measured != "requests 17 %, CPU 15 % of a node's heartbeats (fleet)" {
		t.Errorf("both: %s (%s), want met on requests and the fleet's CPU", r.Verdict, r.Measured)
	}
	if r := row("BenchmarkAgentBesideKubelet-2 1 1 ns/op 0.17 requests-agent/kubelet 0.2 goroutines-agent/kubelet 3.0 heap-agent/kubelet 9 cpu-agent/kubelet\n"); r.Verdict != "met" || strings.Contains(r.Measured, "heap") {
		t.Errorf("real nodes only: %s (%s), want met on requests and goroutines, the noisy heap and CPU not read", r.Verdict, r.Measured)
	}
	if r := row(""); r.Verdict != "not measured" {
		t.Errorf("nothing: %s (%s), want not measured", r.Verdict, r.Measured)
	}
	if r := row("BenchmarkFleet-2 1 1 ns/op 30 apiserver-cpu-%-of-heartbeats\nBenchmarkAgentBesideKubelet-2 1 1 ns/op 0.17 requests-agent/kubelet\n"); r.Verdict != "missed" {
		t.Errorf("CPU 30 %% of the heartbeats: %s, want missed", r.Verdict)
	}
}

// TestUnknownDurationIsNotMeasured: without bench-scale's start the row
// of its own duration says not measured, not 0s.
func TestUnknownDurationIsNotMeasured(t *testing.T) {
	for _, r := range Evaluate(results{}, 2000, 0, 30*time.Minute) {
		if strings.HasPrefix(r.Target, "`make bench-scale") && (r.Verdict != "not measured" || r.Measured != "—") {
			t.Errorf("%q: %s (%s), want not measured (—)", r.Target, r.Verdict, r.Measured)
		}
	}
}
