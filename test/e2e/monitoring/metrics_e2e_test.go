//go:build e2e

package monitoring_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// query is one PromQL expression of the chart and where it is used.
type query struct{ where, expr string }

// chartQueries are the expressions of every alerting rule in the stored
// PrometheusRule and of every panel target in the stored dashboard.
func (e *env) chartQueries(t *testing.T) []query {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(e.ruleFile, &rules); err != nil {
		t.Fatal(err)
	}
	var out []query
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, query{"alert " + r.Alert, r.Expr})
		}
	}
	var dash any
	if err := json.Unmarshal([]byte(e.dashboard), &dash); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	n := len(out)
	var walk func(v any, title string)
	walk = func(v any, title string) {
		switch v := v.(type) {
		case map[string]any:
			if s, ok := v["title"].(string); ok {
				title = s
			}
			if s, ok := v["expr"].(string); ok {
				out = append(out, query{fmt.Sprintf("dashboard panel %q", title), s})
			}
			for _, c := range v {
				walk(c, title)
			}
		case []any:
			for _, c := range v {
				walk(c, title)
			}
		}
	}
	walk(dash, "")
	if len(out) == n {
		t.Fatal("the dashboard has no expr")
	}
	return out
}

// grafanaVars are Grafana's built-in range variables, replaced by a range
// when an expression is sent to Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// testQueriedMetricsExported: every expression of the alert rules and of the
// dashboard parses in Prometheus, and every metric they query is exported on
// /metrics by the agents on the real nodes or the webhook replicas (after
// the steps above made them admit, clean up, re-taint and run remediation),
// and is in Prometheus from the scrapes. A missing one is named with where
// it is used.
func (e *env) testQueriedMetricsExported(t *testing.T) {
	ctx := t.Context()
	queries := e.chartQueries(t)
	used := map[string][]string{}
	for _, q := range queries {
		if _, err := e.prom.Query(ctx, grafanaVars.Replace(q.expr)); err != nil {
			t.Errorf("%s: %q does not evaluate in prometheus: %v", q.where, q.expr, err)
		}
		names, err := metricNames(q.expr)
		if err != nil {
			t.Errorf("%s: %v", q.where, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: %q queries no metric", q.where, q.expr)
		}
		for _, n := range names {
			used[n] = append(used[n], q.where)
		}
	}

	exported := map[string][]string{}
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	scraped := map[string]int{}
	for _, p := range pods.Items {
		app := p.Labels["app"]
		if (app != "kube-node-ready" && app != "kube-node-ready-webhook") || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			continue
		}
		names, err := exposedNames("http://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(harness.MetricsPort)) + "/metrics")
		if err != nil {
			t.Errorf("scrape %s (%s): %v", p.Name, app, err)
			continue
		}
		scraped[app]++
		for _, n := range names {
			exported[n] = append(exported[n], p.Name)
		}
	}
	if scraped["kube-node-ready"] != len(e.c.Nodes) || scraped["kube-node-ready-webhook"] != 2 {
		t.Fatalf("scraped %v, want an agent per real node (%d) and 2 webhook replicas", scraped, len(e.c.Nodes))
	}
	inProm, err := e.prom.MetricNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := exported[n]; !ok {
			t.Errorf("metric %s (used by %s) is not exported by any agent or webhook pod", n, strings.Join(used[n], ", "))
			continue
		}
		if !slices.Contains(inProm, n) {
			t.Errorf("metric %s (used by %s) is exported by %v but prometheus has no series of it", n, strings.Join(used[n], ", "), exported[n])
		}
	}
	if !t.Failed() {
		t.Logf("%d expressions query %d metrics, each exported and scraped: %s", len(queries), len(names), strings.Join(names, ", "))
	}
}

// exposedNames are the names of the samples in a Prometheus text exposition.
func exposedNames(url string) ([]string, error) {
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			seen[line[:i]] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	return out, sc.Err()
}

// readmeScrapeConfig is the plain Prometheus configuration in the Monitoring
// section of docs/operate.md: the YAML block that holds scrape_configs.
func readmeScrapeConfig(t *testing.T) map[string]any {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "operate.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Monitoring\n")
	if !ok {
		t.Fatal("docs/operate.md has no ## Monitoring section")
	}
	for _, next := range []string{"\n## ", "\n### "} {
		if end := strings.Index(section, next); end >= 0 {
			section = section[:end]
		}
	}
	for _, block := range strings.Split(section, "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.Contains(block, "scrape_configs:") {
			continue
		}
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(block), &cfg); err != nil {
			t.Fatalf("docs/operate.md Monitoring scrape configuration: %v\n%s", err, block)
		}
		return cfg
	}
	t.Fatal("docs/operate.md ## Monitoring: no yaml block with scrape_configs")
	return nil
}

// testReadmeScrapeConfig: the configuration in docs/operate.md for a Prometheus
// without the operator, given the test's kubeconfig, discovers (promtool
// check service-discovery, against the API server) exactly the targets the
// ServiceMonitors' configuration scrapes, with the same address, job,
// namespace, pod and node labels.
func (e *env) testReadmeScrapeConfig(t *testing.T) {
	ctx := t.Context()
	cfg := readmeScrapeConfig(t)
	kubeconfig, err := e.c.ServiceAccountKubeconfig(ctx, promNamespace, promSA)
	if err != nil {
		t.Fatal(err)
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	if len(jobs) != 1 {
		t.Fatalf("docs/operate.md scrape_configs: %d jobs, want 1", len(jobs))
	}
	job := jobs[0].(map[string]any)
	for _, sd := range job["kubernetes_sd_configs"].([]any) {
		sd.(map[string]any)["kubeconfig_file"] = kubeconfig
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kube-node-ready-rules.yaml"), e.ruleFile, 0o644); err != nil {
		t.Fatal(err)
	}
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	targets, err := e.prom.Targets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := func(address string, l map[string]string) string {
		node, ok := l["node"]
		if !ok {
			node = "(none)"
		}
		return fmt.Sprintf("%s job=%s namespace=%s pod=%s node=%s", address, l["job"], l["namespace"], l["pod"], node)
	}
	var operator []string
	for _, tg := range targets {
		operator = append(operator, key(tg.Labels["instance"], tg.Labels))
	}
	sort.Strings(operator)
	// promtool reports what discovery found within its timeout: on a busy
	// machine the first try may be too short.
	var readme []string
	for _, timeout := range []string{"5s", "15s", "30s"} {
		out, err := e.c.Promtool(ctx, dir, "check", "service-discovery", "--timeout="+timeout, path, job["job_name"].(string))
		if err != nil {
			t.Fatalf("the configuration in docs/operate.md: %v", err)
		}
		var discovered []struct {
			Labels map[string]string `json:"labels"`
		}
		if err := json.Unmarshal([]byte(out), &discovered); err != nil {
			t.Fatalf("promtool check service-discovery output: %v\n%s", err, out)
		}
		readme = nil
		for _, d := range discovered {
			if len(d.Labels) > 0 { // dropped by relabelling otherwise
				readme = append(readme, key(d.Labels["__address__"], d.Labels))
			}
		}
		sort.Strings(readme)
		if slices.Equal(readme, operator) {
			break
		}
	}
	if !slices.Equal(readme, operator) {
		t.Errorf("the scrape configuration in docs/operate.md finds\n  %s\nthe ServiceMonitors' scrape\n  %s", strings.Join(readme, "\n  "), strings.Join(operator, "\n  "))
	}
}
