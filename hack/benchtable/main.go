// Command benchtable prints the fleet-scale targets as one table, each met
// or missed, from the output of the benchmarks `make bench-scale` runs (the
// metrics they report with b.ReportMetric): the table docs/benchmarks.md
// keeps current.
//
//	go run ./hack/benchtable -nodes 2000 -start 1764331200 out/*.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	nodes := flag.Int("nodes", 10000, "the fleet size the benchmarks ran at (FLEET_NODES)")
	start := flag.Int64("start", 0, "when make bench-scale started, Unix seconds; 0 leaves its own duration out")
	limit := flag.Duration("limit", 30*time.Minute, "the target for make bench-scale's own duration")
	flag.Parse()
	results := results{}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		results.read(f)
		f.Close()
	}
	var took time.Duration
	if *start > 0 {
		took = time.Since(time.Unix(*start, 0))
	}
	fmt.Print(Table(Evaluate(results, *nodes, took, *limit)))
}

// results are the benchmarks' metrics: benchmark name (without the -CPU
// suffix) → unit → value.
type results map[string]map[string]float64

// read takes every benchmark result line of r: "BenchmarkX-2 1 123 ns/op 4.5 unit ...".
func (res results) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue
		}
		name, _, _ := strings.Cut(fields[0], "-")
		if res[name] == nil {
			res[name] = map[string]float64{}
		}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				res[name][fields[i+1]] = v
			}
		}
	}
}

// get is one metric, and whether it was reported.
func (res results) get(bench, unit string) (float64, bool) {
	v, ok := res[bench][unit]
	return v, ok
}

// notMeasuredPrefix starts what a row that was not measured says it
// lacks; any other text of a row not measured is left out ("—").
const notMeasuredPrefix = "not in this run: "

// Row is one target.
type Row struct {
	Target, Goal, Measured string
	// Verdict is met, missed or not measured.
	Verdict string
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// Evaluate turns the metrics into the targets' rows, at nodes, with
// bench-scale's own duration took (0: unknown) against limit.
func Evaluate(res results, nodes int, took, limit time.Duration) []Row {
	var rows []Row
	add := func(target, goal string, measure func() (string, bool, bool)) {
		m, ok, measured := measure()
		row := Row{Target: target, Goal: goal, Measured: m, Verdict: verdict(ok)}
		if !measured {
			// A row not measured says only what it lacks, if anything.
			row.Verdict = "not measured"
			if row.Measured = m; !strings.HasPrefix(m, notMeasuredPrefix) {
				row.Measured = "—"
			}
		}
		rows = append(rows, row)
	}
	add("the agent's cost beside a kubelet's, per node and hour (requests, watches, events, bytes, goroutines; API server CPU)", "≤ 25 % of a kubelet in every column",
		func() (string, bool, bool) {
			// BenchmarkAgentBesideKubelet (test/bench/realnode, make
			// bench-beside) reports each column's agent / kubelet; its
			// heap and CPU, differences of windows on a few nodes, are
			// noise and not read. The CPU comes from the fleet: the
			// agents' added API server CPU against KWOK's heartbeats,
			// which send a kubelet's Lease renewals and status and so cost
			// at most what a kubelet costs.
			var parts []string
			met, measured := true, false
			for _, col := range []string{"requests", "watches", "events", "bytes", "goroutines"} {
				v, ok := res.get("BenchmarkAgentBesideKubelet", col+"-agent/kubelet")
				if !ok {
					continue
				}
				measured = true
				met = met && v <= 0.25
				parts = append(parts, fmt.Sprintf("%s %.0f %%", col, 100*v))
			}
			if !measured {
				// Not decided without the real-node columns, whatever
				// the fleet's CPU says.
				parts = append(parts, notMeasuredPrefix+"requests, watches, events, bytes, goroutines (make bench-beside: 4 real nodes, about 40 min)")
			}
			if v, ok := res.get("BenchmarkFleet", "apiserver-cpu-%-of-heartbeats"); ok {
				met = met && v <= 25
				parts = append(parts, fmt.Sprintf("CPU %.0f %% of a node's heartbeats (fleet)", v))
			}
			return strings.Join(parts, ", "), met, measured
		})
	join := func(unit, format string, limit float64) func() (string, bool, bool) {
		return func() (string, bool, bool) {
			small, ok1 := res.get("BenchmarkJoinSlope", unit+"-100")
			large, ok2 := res.get("BenchmarkJoinSlope", fmt.Sprintf("%s-%d", unit, nodes))
			if !ok1 || !ok2 || small == 0 {
				return "", false, false
			}
			return fmt.Sprintf(format+" → "+format+" (%.2f×)", small, large, large/small), large/small <= limit, true
		}
	}
	add(fmt.Sprintf("a node joining: its agent's requests, 100 → %d nodes", nodes), "flat", join("join-requests", "%.0f", 1))
	add(fmt.Sprintf("a node joining: the bytes its agent reads, 100 → %d nodes", nodes), "flat within noise (≤ 1.25×)", join("join-bytes", "%.0f B", 1.25))
	add(fmt.Sprintf("a node joining: API server time on its requests, 100 → %d nodes", nodes), "flat within noise (≤ 1.5×)", join("join-server-ms", "%.1f ms", 1.5))
	add("after a cluster-wide DNS outage: the agents' request rate in the first period after every re-taint was undone", "≤ 1.1× the steady rate", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkFleet", "after-recovery-rate-ratio")
		return fmt.Sprintf("%.2f×", v), v <= 1.1, ok
	})
	add("steady state: the agents' requests per node per round", "≤ 1.0, all from the watch cache", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkFleet", "requests/node/round")
		etcd, _ := res.get("BenchmarkFleet", "etcd-reads")
		// A window holds a few more jittered rounds than its length:
		// 1.003–1.007 were read as the floor met.
		return fmt.Sprintf("%.3f, %.0f from etcd", v, etcd), v <= 1.01 && etcd == 0, ok
	})
	add("a cluster-wide DNS outage: nodes re-tainted at once", "never above the budget (10 %)", func() (string, bool, bool) {
		most, ok1 := res.get("BenchmarkFleet", "retainted-max")
		budget, ok2 := res.get("BenchmarkFleet", "retaint-budget")
		return fmt.Sprintf("at most %.0f of %.0f", most, budget), most <= budget, ok1 && ok2
	})
	add(fmt.Sprintf("`kubectl node-ready status` over %d nodes", nodes), "≤ 3 s", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkFleetStatus", "status-s-median")
		return fmt.Sprintf("%.2f s", v), v <= 3, ok
	})
	add("1 000 nodes deleted at once: every cleanup done", "≤ 30 s", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkCleanup", "burst-gone-s-median")
		return fmt.Sprintf("%.1f s", v), v <= 30, ok
	})
	add(fmt.Sprintf("the webhook with %d cloud-shaped nodes: resident memory (peak)", nodes), "≤ 100 MiB", func() (string, bool, bool) {
		rss, ok := res.get("BenchmarkWebhookMemory", "rss-MiB-median")
		hwm, _ := res.get("BenchmarkWebhookMemory", "hwm-MiB-median")
		return fmt.Sprintf("%.1f MiB (peak %.1f)", rss, hwm), hwm <= 100, ok
	})
	add(fmt.Sprintf("the webhook: back-fill of %d nodes created while it was down", nodes), "≤ 60 s", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkWebhookMemory", "backfill-s-median")
		return fmt.Sprintf("%.1f s", v), v <= 60, ok
	})
	add(fmt.Sprintf("the webhook: remediation scan over %d unverified nodes", nodes), "≤ 1 s", func() (string, bool, bool) {
		v, ok := res.get("BenchmarkRemediationScan", "scan-max-s")
		return fmt.Sprintf("%.3f s (slowest)", v), v <= 1, ok
	})
	add(fmt.Sprintf("`make bench-scale FLEET_NODES=%d` on this machine", nodes), fmt.Sprintf("≤ %s", limit), func() (string, bool, bool) {
		if took <= 0 {
			return "", false, false
		}
		return took.Round(time.Second).String(), took <= limit, true
	})
	return rows
}

// Table is rows as a Markdown table.
func Table(rows []Row) string {
	var sb strings.Builder
	sb.WriteString("| target | goal | measured | |\n| --- | --- | --- | --- |\n")
	for _, r := range rows {
		v := r.Verdict
		if v != "not measured" {
			v = "**" + v + "**"
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", r.Target, r.Goal, r.Measured, v)
	}
	return sb.String()
}
