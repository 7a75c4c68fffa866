package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A real Prometheus server run as a process in the harness network
// namespace, where it reaches the API server for service discovery and the
// pod IPs of real nodes for scraping; and the translation of the chart's
// ServiceMonitors into the scrape configuration the Prometheus Operator would
// generate, so a test scrapes what the chart says and catches drift.
//
// Prometheus and promtool are the ones `make tools` builds into bin/ from
// the pinned module in test/tools/prometheus, with Kubernetes service
// discovery: Debian's prometheus package is built without it.

// Prometheus is a running Prometheus server.
type Prometheus struct {
	// URL is the base URL of its HTTP API (http://127.0.0.1:PORT).
	URL string
	// Dir holds its configuration, rule files, data and log.
	Dir string

	proc *Process
	hc   *http.Client
}

// StartPrometheus writes config as dir/prometheus.yml and every files entry
// (name relative to dir, e.g. rule files the configuration names) next to
// it, checks the configuration with promtool, starts bin/prometheus on a
// free loopback port and waits until it is ready.
func (cp *ControlPlane) StartPrometheus(ctx context.Context, dir, config string, files map[string]string) (*Prometheus, error) {
	bin, err := FirstTool(cp.BinDir, "prometheus")
	if err != nil {
		return nil, fmt.Errorf("prometheus with Kubernetes service discovery (Debian's has none): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		return nil, err
	}
	if out, err := cp.Promtool(ctx, dir, "check", "config", cfg); err != nil {
		return nil, fmt.Errorf("%w\nconfiguration:\n%s", err, config)
	} else if strings.Contains(out, "WARNING") {
		cp.logf("promtool check config: %s", out)
	}
	port, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	proc, err := StartProcess(dir, "prometheus", bin, []string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=2h",
		"--web.listen-address=" + addr,
		"--log.level=info",
	}, nil)
	if err != nil {
		return nil, err
	}
	p := &Prometheus{URL: "http://" + addr, Dir: dir, proc: proc, hc: &http.Client{Timeout: 5 * time.Second}}
	err = waitFor(ctx, proc, 60*time.Second, func() (bool, error) {
		resp, err := p.hc.Get(p.URL + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		_ = proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("prometheus not ready: %w\n%s", err, proc.Tail(20))
	}
	return p, nil
}

// StartPrometheusT is StartPrometheus for a test: an error fails t, and the
// server stops when the test ends, its log printed if the test failed.
func (cp *ControlPlane) StartPrometheusT(t testing.TB, dir, config string, files map[string]string) *Prometheus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := cp.StartPrometheus(ctx, dir, config, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus log:\n%s", p.Tail(40))
		}
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// Promtool runs bin/promtool in dir and returns its standard output; a
// failure is an error with its whole output.
func (cp *ControlPlane) Promtool(ctx context.Context, dir string, args ...string) (string, error) {
	bin, err := FirstTool(cp.BinDir, "promtool")
	if err != nil {
		return "", fmt.Errorf("promtool with Kubernetes service discovery: %w", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("promtool %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// Stop stops the server.
func (p *Prometheus) Stop() error { return p.proc.Stop(15 * time.Second) }

// Tail returns the last n lines of the server's log.
func (p *Prometheus) Tail(n int) string { return p.proc.Tail(n) }

// PromTarget is one active scrape target (/api/v1/targets).
type PromTarget struct {
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
}

// PromAlert is one pending or firing alert (/api/v1/alerts).
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// PromRule is one loaded rule (/api/v1/rules).
type PromRule struct {
	Name      string  `json:"name"`
	Query     string  `json:"query"`
	Duration  float64 `json:"duration"`
	Health    string  `json:"health"`
	LastError string  `json:"lastError"`
	Type      string  `json:"type"`
	State     string  `json:"state"`
}

// PromSample is one element of an instant vector.
type PromSample struct {
	Metric map[string]string
	Value  float64
}

// api calls a Prometheus HTTP API endpoint (form-encoded POST when form is
// set) and decodes the "data" of a successful answer into out.
func (p *Prometheus) api(ctx context.Context, path string, form url.Values, out any) error {
	var req *http.Request
	var err error
	if form != nil {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, p.URL+path, strings.NewReader(form.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
	}
	if err != nil {
		return err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("prometheus %s: HTTP %d: %.200s", path, resp.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("prometheus %s: %s: %s", path, env.ErrorType, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// Targets lists the active scrape targets.
func (p *Prometheus) Targets(ctx context.Context) ([]PromTarget, error) {
	var d struct {
		ActiveTargets []PromTarget `json:"activeTargets"`
	}
	err := p.api(ctx, "/api/v1/targets?state=active", nil, &d)
	return d.ActiveTargets, err
}

// Alerts lists the pending and firing alerts.
func (p *Prometheus) Alerts(ctx context.Context) ([]PromAlert, error) {
	var d struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := p.api(ctx, "/api/v1/alerts", nil, &d)
	return d.Alerts, err
}

// Rules lists every loaded rule of every group.
func (p *Prometheus) Rules(ctx context.Context) ([]PromRule, error) {
	var d struct {
		Groups []struct {
			Rules []PromRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api(ctx, "/api/v1/rules", nil, &d); err != nil {
		return nil, err
	}
	var out []PromRule
	for _, g := range d.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// Query evaluates expr now; an expression that does not parse is an error
// naming Prometheus' complaint. Scalar results come back as one sample
// without labels.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]PromSample, error) {
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query", url.Values{"query": {expr}}, &d); err != nil {
		return nil, err
	}
	parse := func(pair []any) (float64, error) {
		if len(pair) != 2 {
			return 0, fmt.Errorf("sample %v", pair)
		}
		s, _ := pair[1].(string)
		return strconv.ParseFloat(s, 64)
	}
	switch d.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
		}
		if err := json.Unmarshal(d.Result, &vec); err != nil {
			return nil, err
		}
		out := make([]PromSample, 0, len(vec))
		for _, s := range vec {
			v, err := parse(s.Value)
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", expr, err)
			}
			out = append(out, PromSample{Metric: s.Metric, Value: v})
		}
		return out, nil
	case "scalar":
		var pair []any
		if err := json.Unmarshal(d.Result, &pair); err != nil {
			return nil, err
		}
		v, err := parse(pair)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		return []PromSample{{Value: v}}, nil
	default:
		return nil, fmt.Errorf("query %s: result type %s (want an instant vector or scalar)", expr, d.ResultType)
	}
}

// MetricNames lists the name of every series Prometheus holds.
func (p *Prometheus) MetricNames(ctx context.Context) ([]string, error) {
	var names []string
	err := p.api(ctx, "/api/v1/label/__name__/values", nil, &names)
	return names, err
}

// ServiceMonitorScrapeConfigs translates a ServiceMonitor (the object as
// JSON, as the API server returns it) into the Prometheus scrape
// configurations the Prometheus Operator generates for it with the
// EndpointSlice discovery role: one job per endpoint, discovering in the
// ServiceMonitor's namespace (with kubeconfig, a kubeconfig file, for a
// Prometheus outside the cluster), keeping the Services that match the
// selector and the endpoints of the named port, with the operator's target
// labels (namespace, service, pod, container, job, endpoint) and then the
// endpoint's own relabelings. A field it does not translate is an error
// naming it, so a chart change that needs more here fails instead of being
// tested with a configuration that differs from the operator's.
func ServiceMonitorScrapeConfigs(obj []byte, kubeconfig string) ([]map[string]any, error) {
	var sm struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(obj, &sm); err != nil {
		return nil, err
	}
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector *struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port              string       `json:"port"`
			Path              string       `json:"path"`
			Scheme            string       `json:"scheme"`
			Interval          string       `json:"interval"`
			ScrapeTimeout     string       `json:"scrapeTimeout"`
			HonorLabels       bool         `json:"honorLabels"`
			Relabelings       []relabeling `json:"relabelings"`
			MetricRelabelings []relabeling `json:"metricRelabelings"`
		} `json:"endpoints"`
	}
	dec := json.NewDecoder(bytes.NewReader(sm.Spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return nil, fmt.Errorf("ServiceMonitor %s/%s: a field the harness does not translate: %w", sm.Metadata.Namespace, sm.Metadata.Name, err)
	}
	namespaces := []string{sm.Metadata.Namespace}
	if spec.NamespaceSelector != nil && len(spec.NamespaceSelector.MatchNames) > 0 {
		namespaces = spec.NamespaceSelector.MatchNames
	}
	var keys []string
	for k := range spec.Selector.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []map[string]any
	for i, ep := range spec.Endpoints {
		if ep.Port == "" {
			return nil, fmt.Errorf("ServiceMonitor %s/%s endpoint %d: no port name (targetPort is not translated)", sm.Metadata.Namespace, sm.Metadata.Name, i)
		}
		var relabel []map[string]any
		for _, k := range keys {
			l := sanitizeLabelName(k)
			relabel = append(relabel, map[string]any{
				"action":        "keep",
				"source_labels": []string{"__meta_kubernetes_service_label_" + l, "__meta_kubernetes_service_labelpresent_" + l},
				"regex":         "(" + regexp.QuoteMeta(spec.Selector.MatchLabels[k]) + ");true",
			})
		}
		relabel = append(relabel,
			map[string]any{"action": "keep", "source_labels": []string{"__meta_kubernetes_endpointslice_port_name"}, "regex": regexp.QuoteMeta(ep.Port)},
			map[string]any{"source_labels": []string{"__meta_kubernetes_namespace"}, "target_label": "namespace"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "service"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_pod_name"}, "target_label": "pod"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_pod_container_name"}, "target_label": "container"},
			map[string]any{"action": "drop", "source_labels": []string{"__meta_kubernetes_pod_phase"}, "regex": "(Failed|Succeeded)"},
			map[string]any{"source_labels": []string{"__meta_kubernetes_service_name"}, "target_label": "job"},
			map[string]any{"target_label": "endpoint", "replacement": ep.Port},
		)
		for _, r := range ep.Relabelings {
			relabel = append(relabel, r.prometheus())
		}
		sd := map[string]any{"role": "endpointslice", "namespaces": map[string]any{"names": namespaces}}
		if kubeconfig != "" {
			sd["kubeconfig_file"] = kubeconfig
		}
		job := map[string]any{
			"job_name":              fmt.Sprintf("serviceMonitor/%s/%s/%d", sm.Metadata.Namespace, sm.Metadata.Name, i),
			"honor_labels":          ep.HonorLabels,
			"metrics_path":          orDefault(ep.Path, "/metrics"),
			"scheme":                orDefault(ep.Scheme, "http"),
			"kubernetes_sd_configs": []any{sd},
			"relabel_configs":       relabel,
		}
		if ep.Interval != "" {
			job["scrape_interval"] = ep.Interval
		}
		if ep.ScrapeTimeout != "" {
			job["scrape_timeout"] = ep.ScrapeTimeout
		}
		if len(ep.MetricRelabelings) > 0 {
			var mr []map[string]any
			for _, r := range ep.MetricRelabelings {
				mr = append(mr, r.prometheus())
			}
			job["metric_relabel_configs"] = mr
		}
		out = append(out, job)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ServiceMonitor %s/%s has no endpoints", sm.Metadata.Namespace, sm.Metadata.Name)
	}
	return out, nil
}

// relabeling is the Prometheus Operator's RelabelConfig.
type relabeling struct {
	SourceLabels []string `json:"sourceLabels"`
	Separator    *string  `json:"separator"`
	TargetLabel  string   `json:"targetLabel"`
	Regex        string   `json:"regex"`
	Modulus      uint64   `json:"modulus"`
	Replacement  *string  `json:"replacement"`
	Action       string   `json:"action"`
}

// prometheus is r in Prometheus' relabel_config form.
func (r relabeling) prometheus() map[string]any {
	m := map[string]any{}
	if len(r.SourceLabels) > 0 {
		m["source_labels"] = r.SourceLabels
	}
	if r.Separator != nil {
		m["separator"] = *r.Separator
	}
	if r.TargetLabel != "" {
		m["target_label"] = r.TargetLabel
	}
	if r.Regex != "" {
		m["regex"] = r.Regex
	}
	if r.Modulus != 0 {
		m["modulus"] = r.Modulus
	}
	if r.Replacement != nil {
		m["replacement"] = *r.Replacement
	}
	if r.Action != "" {
		m["action"] = strings.ToLower(r.Action)
	}
	return m
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// sanitizeLabelName is how Kubernetes service discovery turns a Kubernetes
// label into part of a meta label name (app.kubernetes.io/name ->
// app_kubernetes_io_name).
func sanitizeLabelName(s string) string { return invalidLabelChars.ReplaceAllString(s, "_") }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
