//go:build e2e

package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	release       = harness.ChartRelease
	namespace     = "kube-node-ready"
	finalizer     = "infra.894.io/node-cleanup"
	verifiedLabel = "node-ready/verified"

	// Prometheus runs as this ServiceAccount, with only what discovery needs.
	promNamespace = "monitoring"
	promSA        = "prometheus"

	// hookAddr is the receiver of the critical hook plugin, in the harness
	// namespace, which the webhook pods on the real nodes reach as they
	// reach the API server.
	hookAddr = "10.213.0.40:8080"

	// The NodeCleanupPending threshold and pending period of this install.
	cleanupPendingSeconds = 5
	cleanupPendingFor     = 5 * time.Second
)

// unhealthyKey is the chart's default re-taint: the default preset's.
var unhealthyKey = harness.UnhealthyTaint.Key

// receiver answers the hook plugin with 500 until it accepts.
type receiver struct {
	mu     sync.Mutex
	accept bool
	hits   int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits++
	if !r.accept {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (r *receiver) set(accept bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.accept = accept
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits
}

type env struct {
	c     *harness.Cluster
	chart string
	prom  *harness.Prometheus
	rcv   *receiver
	// ruleFile is the PrometheusRule's spec as the API server stored it.
	ruleFile []byte
	// dashboard is the dashboard JSON as the API server stored it.
	dashboard string
}

// TestMonitoringOnRealNodes: one cluster of two real nodes, the chart
// installed with every monitoring object, a real Prometheus scraping it; the
// steps share them and each checks its own outcome.
func TestMonitoringOnRealNodes(t *testing.T) {
	chart, err := harness.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{chart: chart, rcv: &receiver{}}
	e.c = harness.StartClusterT(t, harness.ClusterOptions{ProjectImages: true})
	harness.ServeHTTP(t, hookAddr, e.rcv)
	e.install(t)
	e.startPrometheus(t)
	for _, s := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"readme-scrape-config", e.testReadmeScrapeConfig},
		{"cleanup-pending-alert", e.testCleanupPending},
		{"retainted-alert", e.testRetainted},
		{"queried-metrics-exported", e.testQueriedMetricsExported},
	} {
		t.Run(s.name, s.run)
	}
}

// values are the chart values of the install: local images, a short check
// period, a critical hook plugin aimed at the receiver, remediation in
// report mode (so its series exist), and every monitoring object with a 1 s
// scrape interval and a short NodeCleanupPending.
func (e *env) values(t *testing.T) string {
	t.Helper()
	agent := "checkPeriod: 2s\nnetwork: {peerRefresh: 10s}"
	webhook := fmt.Sprintf(`cleanup:
  plugins:
    log: {}
    hook: {critical: true, url: "http://%s/nodes", retries: 0, timeout: 5s}
remediation: {policy: report}`, hookAddr)
	v, err := e.c.LocalImageValues(agent, webhook)
	if err != nil {
		t.Fatal(err)
	}
	v += fmt.Sprintf(`monitoring:
  serviceMonitor: {enabled: true, interval: 1s}
  prometheusRule: {enabled: true, cleanupPendingSeconds: %d, cleanupPendingFor: %s}
  grafanaDashboard: {enabled: true}
`, cleanupPendingSeconds, promDuration(cleanupPendingFor))
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(v), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func promDuration(d time.Duration) string { return fmt.Sprintf("%ds", int(d.Seconds())) }

// install: with the Prometheus Operator's CRDs, helm install with the
// ServiceMonitors, the PrometheusRule and the dashboard ConfigMap is
// accepted; every object reads back with everything the chart rendered (a
// field the CRD does not know would be pruned), and a strict server-side
// dry run of them finds no unknown field.
func (e *env) install(t *testing.T) {
	ctx := t.Context()
	if err := e.c.InstallCRDs(ctx, "prometheus-operator"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e.c.Helm(ctx, "install", release, e.chart, "--namespace", namespace, "--create-namespace",
		"--values", e.values(t), "--wait", "--timeout", "4m"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install --wait took %s", time.Since(start).Round(time.Millisecond))
	harness.Eventually(t, 2*time.Minute, "real nodes verified", func() (bool, string) { return e.verified(t) })

	manifest, err := e.c.Helm(ctx, "get", "manifest", release, "--namespace", namespace)
	if err != nil {
		t.Fatal(err)
	}
	var monitoring []string
	kinds := map[string]int{}
	for _, doc := range strings.Split(manifest, "\n---") {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec map[string]any    `json:"spec"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		var stored map[string]any
		switch {
		case obj.Kind == "ServiceMonitor" || obj.Kind == "PrometheusRule":
			stored = e.getJSON(t, strings.ToLower(obj.Kind)+"s.monitoring.coreos.com", obj.Metadata.Name)
			if diff := missingFrom(obj.Spec, stored["spec"], "spec"); len(diff) > 0 {
				t.Errorf("%s %s as stored differs from what the chart rendered (pruned by the CRD's schema?):\n  %s", obj.Kind, obj.Metadata.Name, strings.Join(diff, "\n  "))
			}
		case obj.Kind == "ConfigMap" && strings.HasSuffix(obj.Metadata.Name, "-dashboard"):
			stored = e.getJSON(t, "configmap", obj.Metadata.Name)
			data, _ := stored["data"].(map[string]any)
			e.dashboard, _ = data["kube-node-ready.json"].(string)
			file, err := os.ReadFile(filepath.Join(e.chart, "dashboards", "kube-node-ready.json"))
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(e.dashboard) != strings.TrimSpace(string(file)) {
				t.Errorf("dashboard ConfigMap %s does not hold dashboards/kube-node-ready.json", obj.Metadata.Name)
			}
			if !json.Valid([]byte(e.dashboard)) {
				t.Errorf("dashboard ConfigMap %s: not JSON", obj.Metadata.Name)
			}
			labels, _ := stored["metadata"].(map[string]any)["labels"].(map[string]any)
			if labels["grafana_dashboard"] != "1" {
				t.Errorf("dashboard ConfigMap labels %v: want grafana_dashboard=1 for the Grafana sidecar", labels)
			}
		default:
			continue
		}
		kinds[obj.Kind]++
		monitoring = append(monitoring, doc)
		if obj.Kind == "PrometheusRule" {
			if e.ruleFile, err = yaml.Marshal(stored["spec"]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if kinds["ServiceMonitor"] != 2 || kinds["PrometheusRule"] != 1 || kinds["ConfigMap"] != 1 {
		t.Fatalf("monitoring objects installed: %v, want 2 ServiceMonitors (agent, webhook), 1 PrometheusRule, 1 dashboard ConfigMap", kinds)
	}
	out, err := e.c.Kubectl(ctx, strings.NewReader(strings.Join(monitoring, "\n---\n")),
		"apply", "--server-side", "--dry-run=server", "--validate=strict", "--force-conflicts", "-f", "-")
	if err != nil {
		t.Fatalf("strict server-side dry run of the monitoring objects: %v", err)
	}
	t.Logf("strict server-side dry run:\n%s", strings.TrimSpace(out))
}

func (e *env) getJSON(t *testing.T, resource, name string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(e.c.KubectlOK(t, "", "get", resource, name, "-n", namespace, "-o", "json")), &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// missingFrom lists where got lacks or differs from something in want
// (fields got has in addition, such as defaults, are fine).
func missingFrom(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, stored %T", path, got)}
		}
		var diff []string
		for k, v := range w {
			if _, ok := g[k]; !ok {
				diff = append(diff, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			diff = append(diff, missingFrom(v, g[k], path+"."+k)...)
		}
		return diff
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d items, stored %v", path, len(w), got)}
		}
		var diff []string
		for i := range w {
			diff = append(diff, missingFrom(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return diff
	default:
		// Numbers decode as float64 from both sides.
		if !reflect.DeepEqual(want, got) && fmt.Sprint(want) != fmt.Sprint(got) {
			return []string{fmt.Sprintf("%s: want %v, stored %v", path, want, got)}
		}
		return nil
	}
}

func (e *env) nodes(t *testing.T) []corev1.Node {
	var out []corev1.Node
	for _, rn := range e.c.Nodes {
		n, err := e.c.Client.CoreV1().Nodes().Get(t.Context(), rn.Name, metav1.GetOptions{})
		if err == nil {
			out = append(out, *n)
		}
	}
	return out
}

func tainted(n corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == harness.StartupTaint.Key || t.Key == unhealthyKey
	})
}

func (e *env) verified(t *testing.T) (bool, string) {
	var notYet []string
	nodes := e.nodes(t)
	for _, n := range nodes {
		if tainted(n) || n.Labels[verifiedLabel] != "true" {
			notYet = append(notYet, fmt.Sprintf("%s (taints %v)", n.Name, n.Spec.Taints))
		}
	}
	return len(notYet) == 0 && len(nodes) == len(e.c.Nodes), fmt.Sprintf("not verified: %v", notYet)
}

// promRBAC is what a Prometheus outside the cluster needs to discover the
// chart's targets by EndpointSlices, and no more: read the EndpointSlices,
// Services and Pods of the release's namespace.
const promRBAC = `apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: monitoring}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: prometheus-discovery, namespace: kube-node-ready}
rules:
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [list, watch]
  - apiGroups: [""]
    resources: [services, pods]
    verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: prometheus-discovery, namespace: kube-node-ready}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: prometheus-discovery}
subjects:
  - {kind: ServiceAccount, name: prometheus, namespace: monitoring}
`

// startPrometheus runs Prometheus as the ServiceAccount above with the
// scrape configuration the stored ServiceMonitors describe and the stored
// PrometheusRule as its rule file, and waits until it scrapes every agent on
// the real nodes and every webhook replica, labelled as the ServiceMonitors
// say, and has evaluated every alerting rule of the chart.
func (e *env) startPrometheus(t *testing.T) {
	ctx := t.Context()
	if _, err := e.c.Kubectl(ctx, strings.NewReader(promRBAC), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	who := "--as=system:serviceaccount:" + promNamespace + ":" + promSA
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"watch", "endpointslices.discovery.k8s.io", "-n", namespace}, "yes"},
		{[]string{"list", "pods", "-n", namespace}, "yes"},
		{[]string{"get", "secrets", "-n", namespace}, "no"},
		{[]string{"list", "pods", "-n", "kube-system"}, "no"},
		{[]string{"list", "nodes", "--all-namespaces"}, "no"},
	} {
		out, _ := e.c.Kubectl(ctx, nil, append(append([]string{"auth", "can-i"}, tc.args...), who)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if got := lines[len(lines)-1]; got != tc.want {
			t.Errorf("prometheus may %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	kubeconfig, err := e.c.ServiceAccountKubeconfig(ctx, promNamespace, promSA)
	if err != nil {
		t.Fatal(err)
	}
	var sms struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(e.c.KubectlOK(t, "", "get", "servicemonitors.monitoring.coreos.com", "-n", namespace, "-o", "json")), &sms); err != nil {
		t.Fatal(err)
	}
	var jobs []map[string]any
	for _, sm := range sms.Items {
		j, err := harness.ServiceMonitorScrapeConfigs(sm, kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j...)
	}
	config, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"rule_files":     []string{"rules.yaml"},
		"scrape_configs": jobs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.ruleFile == nil {
		t.Fatal("no PrometheusRule read back")
	}
	e.prom = e.c.StartPrometheusT(t, t.TempDir(), string(config), map[string]string{"rules.yaml": string(e.ruleFile)})

	realNodes := map[string]bool{}
	for _, n := range e.c.Nodes {
		realNodes[n.Name] = true
	}
	harness.Eventually(t, 90*time.Second, "prometheus scrapes every agent and webhook replica", func() (bool, string) {
		targets, err := e.prom.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		agents, webhooks := map[string]bool{}, 0
		var bad []string
		for _, tg := range targets {
			if tg.Health != "up" {
				bad = append(bad, fmt.Sprintf("%s %s: %s %s", tg.ScrapePool, tg.ScrapeURL, tg.Health, tg.LastError))
				continue
			}
			switch tg.Labels["service"] {
			case release:
				agents[tg.Labels["node"]] = true
			case release + "-webhook":
				webhooks++
				if n, ok := tg.Labels["node"]; ok {
					return false, fmt.Sprintf("webhook target %s carries node=%q: its series are not about that node", tg.ScrapeURL, n)
				}
			default:
				bad = append(bad, fmt.Sprintf("unexpected target %v", tg.Labels))
			}
			if tg.Labels["namespace"] != namespace || tg.Labels["pod"] == "" || tg.Labels["job"] != tg.Labels["service"] || tg.Labels["endpoint"] != "metrics" {
				bad = append(bad, fmt.Sprintf("target %s labels %v: want namespace, pod, job and endpoint as the Prometheus Operator sets them", tg.ScrapeURL, tg.Labels))
			}
		}
		ok := len(bad) == 0 && reflect.DeepEqual(agents, realNodes) && webhooks == 2
		return ok, fmt.Sprintf("agents up on %v (want %v), %d webhook replicas up (want 2); %d targets; problems: %v", agents, realNodes, webhooks, len(targets), bad)
	})

	var want struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(e.ruleFile, &want); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	for _, g := range want.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
		}
	}
	harness.Eventually(t, 30*time.Second, "every alerting rule of the chart loaded and evaluated", func() (bool, string) {
		rules, err := e.prom.Rules(ctx)
		if err != nil {
			return false, err.Error()
		}
		health := map[string]string{}
		for _, r := range rules {
			if r.Type == "alerting" {
				health[r.Name] = r.Health + r.LastError
			}
		}
		for _, a := range alerts {
			if health[a] != "ok" {
				return false, fmt.Sprintf("rule %s: %q; loaded: %v", a, health[a], health)
			}
		}
		return len(health) == len(alerts), fmt.Sprintf("loaded %v, want %v", health, alerts)
	})

	// Every real node's agent reports its node verified, under its node.
	samples, err := e.prom.Query(ctx, "node_ready_verified")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range samples {
		got[s.Metric["node"]] = s.Value
	}
	for n := range realNodes {
		if got[n] != 1 {
			t.Errorf("node_ready_verified in prometheus: %v, want 1 for every real node (%v)", got, realNodes)
			break
		}
	}
	if firing := e.alerts(t, "", "firing"); len(firing) > 0 {
		t.Errorf("alerts firing on a healthy cluster: %v", firing)
	}
}

// alerts lists the alerts named name (any, when empty) in state.
func (e *env) alerts(t *testing.T, name, state string) []harness.PromAlert {
	t.Helper()
	all, err := e.prom.Alerts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []harness.PromAlert
	for _, a := range all {
		if (name == "" || a.Labels["alertname"] == name) && a.State == state {
			out = append(out, a)
		}
	}
	return out
}

// testCleanupPending: a node deleted while its critical hook plugin keeps
// failing stays with the finalizer; NodeCleanupPending turns pending once its
// cleanup is older than the threshold and fires after the pending period,
// labelled with the webhook replica and not with the node the replica runs
// on; once the receiver accepts, the node goes and the alert resolves.
func (e *env) testCleanupPending(t *testing.T) {
	ctx := t.Context()
	const name = "held-1"
	if _, err := e.c.CreateNode(ctx, name, harness.NodeOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "finalizer on the new node", func() (bool, string) {
		n, err := e.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(n.Finalizers, finalizer), fmt.Sprintf("finalizers %v", n.Finalizers)
	})
	e.c.KubectlOK(t, "", "delete", "node", name, "--wait=false")
	n, err := e.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp == nil {
		t.Fatalf("node %s after delete: %v, %v", name, n, err)
	}
	deleted := n.DeletionTimestamp.Time

	var pendingAt, firingAt time.Time
	var firing []harness.PromAlert
	harness.Eventually(t, 90*time.Second, "NodeCleanupPending firing", func() (bool, string) {
		if pendingAt.IsZero() && len(e.alerts(t, "NodeCleanupPending", "pending")) > 0 {
			pendingAt = time.Now()
		}
		firing = e.alerts(t, "NodeCleanupPending", "firing")
		if len(firing) > 0 {
			firingAt = time.Now()
		}
		return len(firing) > 0, fmt.Sprintf("pending seen at %v; hook receiver hits %d", pendingAt, e.rcv.count())
	})
	t.Logf("NodeCleanupPending: node deleted %s, pending seen %s later, firing seen %s later",
		deleted.Format(time.RFC3339), pendingAt.Sub(deleted).Round(time.Millisecond), firingAt.Sub(deleted).Round(time.Millisecond))
	if pendingAt.IsZero() {
		t.Errorf("NodeCleanupPending fired without being seen pending for its %s", cleanupPendingFor)
	}
	// deletionTimestamp has 1 s resolution.
	if early := deleted.Add(cleanupPendingSeconds*time.Second + cleanupPendingFor - time.Second); firingAt.Before(early) {
		t.Errorf("NodeCleanupPending firing %s after the deletion, before threshold (%d s) plus pending period (%s)",
			firingAt.Sub(deleted), cleanupPendingSeconds, cleanupPendingFor)
	}
	pods := e.podNames(t, "app=kube-node-ready-webhook")
	for _, a := range firing {
		if a.Labels["severity"] != "warning" || a.Labels["namespace"] != namespace || !slices.Contains(pods, a.Labels["pod"]) {
			t.Errorf("NodeCleanupPending labels %v: want severity warning, namespace %s and one of the webhook pods %v", a.Labels, namespace, pods)
		}
		if nodeLabel, ok := a.Labels["node"]; ok {
			t.Errorf("NodeCleanupPending carries node=%q, the node its webhook replica runs on, not the one held", nodeLabel)
		}
		if want := fmt.Sprintf("more than %d s", cleanupPendingSeconds); !strings.Contains(a.Annotations["summary"], want) {
			t.Errorf("NodeCleanupPending summary %q does not say %q", a.Annotations["summary"], want)
		}
	}
	if n, err := e.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || !slices.Contains(n.Finalizers, finalizer) {
		t.Fatalf("node %s while the alert fires: %v; want it held by %s", name, err, finalizer)
	}
	if e.rcv.count() == 0 {
		t.Errorf("the hook plugin never called the receiver: the node is held for another reason")
	}

	e.rcv.set(true)
	harness.Eventually(t, 90*time.Second, "the held node gone once the receiver accepts", func() (bool, string) {
		_, err := e.c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get %s: %v", name, err)
	})
	harness.Eventually(t, 30*time.Second, "NodeCleanupPending resolved", func() (bool, string) {
		left := append(e.alerts(t, "NodeCleanupPending", "firing"), e.alerts(t, "NodeCleanupPending", "pending")...)
		return len(left) == 0, fmt.Sprintf("still %v", left)
	})
}

// testRetainted: CoreDNS scaled to zero breaks DNS on every real node; the
// fleet budget lets one be re-tainted (node-ready/unhealthy) and holds the
// other: NodeRetainted fires naming the re-tainted node, and
// NodeRetaintSuppressed naming the held one. CoreDNS back, both are verified
// again.
func (e *env) testRetainted(t *testing.T) {
	ctx := t.Context()
	e.c.KubectlOK(t, "", "scale", "-n", "kube-system", "deployment/coredns", "--replicas=0")
	restored := false
	restore := func() {
		if restored {
			return
		}
		restored = true
		if _, err := e.c.Kubectl(context.Background(), nil, "scale", "-n", "kube-system", "deployment/coredns", "--replicas=2"); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore)

	var retainted string
	harness.Eventually(t, 2*time.Minute, "a real node re-tainted", func() (bool, string) {
		var now []string
		for _, n := range e.nodes(t) {
			if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == unhealthyKey }) {
				now = append(now, n.Name)
			}
		}
		if len(now) == 1 {
			retainted = now[0]
		}
		return len(now) == 1, fmt.Sprintf("re-tainted: %v", now)
	})
	harness.Eventually(t, 60*time.Second, "NodeRetainted firing for "+retainted, func() (bool, string) {
		firing := e.alerts(t, api.EventNodeRetainted, "firing")
		for _, a := range firing {
			if a.Labels["node"] == retainted {
				return true, ""
			}
		}
		return false, fmt.Sprintf("firing: %v", firing)
	})
	var others []string
	for _, n := range e.c.Nodes {
		if n.Name != retainted {
			others = append(others, n.Name)
		}
	}
	harness.Eventually(t, 90*time.Second, fmt.Sprintf("NodeRetaintSuppressed firing for %v", others), func() (bool, string) {
		firing := e.alerts(t, "NodeRetaintSuppressed", "firing")
		for _, a := range firing {
			if slices.Contains(others, a.Labels["node"]) && a.Labels["severity"] == "critical" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("firing: %v", firing)
	})
	for _, a := range e.alerts(t, api.EventNodeRetainted, "firing") {
		if a.Labels["node"] != retainted {
			t.Errorf("NodeRetainted fired for %s, which was never re-tainted (the budget holds all but %s)", a.Labels["node"], retainted)
		}
	}

	restore()
	if err := e.c.WaitCoreDNS(ctx, 2); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "real nodes verified after CoreDNS is back", func() (bool, string) { return e.verified(t) })
}

func (e *env) podNames(t *testing.T, selector string) []string {
	t.Helper()
	pods, err := e.c.Client.CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}
