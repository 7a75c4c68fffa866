//go:build e2e

package kubectlplugin_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// agentArgs make the real agents quick: 1 s rounds, short retries.
// The agents take the default preset, whose startup taint new nodes
// register with (harness.StartupTaint).
var agentArgs = []string{"--check-period=1s", "--check-timeout=1s", "--initial-backoff=100ms"}

// startingNode creates a node with the default preset's startup taint.
func startingNode(annotations map[string]string) harness.NodeOptions {
	return harness.NodeOptions{Annotations: annotations}
}

// healthEndpoint is a probe target the test switches between 200 and 503.
func healthEndpoint(t *testing.T, healthy *atomic.Bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String() + "/healthz"
}

// TestStatusAndWhy: nodes in the states the real agent puts them in —
// verified; unverified with dns failing; verified then re-tainted when its
// probe target went down; and one without an agent — as status (table,
// wide, json, yaml, selector) and why show them.
func TestStatusAndWhy(t *testing.T) {
	verified := cp.NewNode(t, "kp-verified", startingNode(nil))
	failing := cp.NewNode(t, "kp-failing", startingNode(nil))
	broken := cp.NewNode(t, "kp-broken", startingNode(nil))
	cp.NewNode(t, "kp-plain", startingNode(nil))
	if err := cp.PublishAgentPeers(t.Context(), verified, failing, broken); err != nil {
		t.Fatal(err)
	}
	var healthy atomic.Bool
	healthy.Store(true)
	target := healthEndpoint(t, &healthy)

	cp.StartAgent(t, verified, agentArgs...)
	// A name that never resolves keeps the dns check failing (and only it:
	// api is the one other check).
	cp.StartAgent(t, failing, append(agentArgs, "--checks=dns,api", "--check.dns.names=does-not-exist.default.svc.cluster.local")...)
	cp.StartAgent(t, broken, append(agentArgs, "--checks=dns,api,probe", "--check.probe.targets="+target+"#status=200&timeout=500ms",
		"--retaint-threshold=2", "--fleet-budget=100%")...)

	isVerified := func(n *corev1.Node) bool {
		return n.Labels[api.VerifiedLabel] == "true" && !hasTaint(n, harness.StartupTaint.Key)
	}
	cp.WaitNode(t, verified.Name, 20*time.Second, "verified", isVerified)
	cp.WaitNode(t, broken.Name, 20*time.Second, "verified", isVerified)
	cp.WaitEvent(t, 15*time.Second, "Node", broken.Name, api.EventNodeVerified, "")
	healthy.Store(false)
	cp.WaitNode(t, broken.Name, 20*time.Second, "re-tainted", func(n *corev1.Node) bool {
		return hasTaint(n, harness.UnhealthyTaint.Key) && n.Labels[api.VerifiedLabel] == "false"
	})
	cp.WaitEvent(t, 15*time.Second, "Node", broken.Name, api.EventNodeRetainted, "")
	cp.WaitNode(t, failing.Name, 20*time.Second, "dns failing in the condition", func(n *corev1.Node) bool {
		c := condition(n)
		if c == nil {
			return false
		}
		m, err := api.ParseConditionMessage(c.Message)
		return err == nil && slices.Contains(m.Failing, "dns")
	})

	t.Run("table", func(t *testing.T) {
		rows := table(t, plugin(t, "status").stdout)
		for _, want := range []map[string]string{
			{"NAME": "kp-broken", "VERIFIED": "false", "TAINT": "unhealthy", "FAILING": "probe", "CLEANUP": "none"},
			{"NAME": "kp-failing", "VERIFIED": "unknown", "TAINT": "unverified", "FAILING": "dns", "CLEANUP": "none"},
			{"NAME": "kp-plain", "VERIFIED": "unknown", "TAINT": "unverified", "FAILING": "-", "CLEANUP": "none"},
			{"NAME": "kp-verified", "VERIFIED": "true", "TAINT": "none", "FAILING": "-", "CLEANUP": "none"},
		} {
			got := rowsOf(rows, want["NAME"])
			if len(got) != 1 {
				t.Fatalf("%d rows for %s in %v", len(got), want["NAME"], rows)
			}
			for col, v := range want {
				if got[0][col] != v {
					t.Errorf("%s: %s = %q, want %q (row %v)", want["NAME"], col, got[0][col], v, got[0])
				}
			}
			if !regexp.MustCompile(`^\d+[smh]`).MatchString(got[0]["AGE"]) {
				t.Errorf("%s: AGE %q is not an age", want["NAME"], got[0]["AGE"])
			}
		}
	})

	t.Run("wide", func(t *testing.T) {
		rows := table(t, plugin(t, "status", "-o", "wide").stdout)
		for name, reason := range map[string]string{"kp-broken": "ChecksFailing", "kp-failing": "ChecksFailing", "kp-plain": "-", "kp-verified": "ChecksPassed"} {
			got := rowsOf(rows, name)
			if len(got) != 1 || got[0]["REASON"] != reason || got[0]["BYPASS"] != "false" || got[0]["FINALIZER"] != "false" {
				t.Errorf("%s: wide row %v, want REASON %s, BYPASS false, FINALIZER false (no webhook here)", name, got, reason)
			}
		}
	})

	t.Run("json and yaml agree with the server", func(t *testing.T) {
		var fromJSON, fromYAML kubectlplugin.List
		if err := json.Unmarshal([]byte(plugin(t, "status", "-o", "json").stdout), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(plugin(t, "status", "-o", "yaml").stdout), &fromYAML); err != nil {
			t.Fatal(err)
		}
		if fromJSON.Kind != kubectlplugin.ListKind || fromJSON.APIVersion != kubectlplugin.ListAPIVersion {
			t.Errorf("json list is %s %s", fromJSON.APIVersion, fromJSON.Kind)
		}
		wantFailing := map[string]string{"kp-broken": "probe", "kp-failing": "dns", "kp-plain": "", "kp-verified": ""}
		for _, l := range []kubectlplugin.List{fromJSON, fromYAML} {
			seen := 0
			for _, item := range l.Items {
				want, ours := wantFailing[item.Name]
				if !ours {
					continue
				}
				seen++
				n := cp.GetNode(t, item.Name)
				verified := n.Labels[api.VerifiedLabel]
				if verified == "" {
					verified = "unknown"
				}
				if item.Verified != verified || strings.Join(item.Failing, ",") != want || !item.CreationTimestamp.Equal(&n.CreationTimestamp) {
					t.Errorf("%s: verified %q failing %v created %v; server: label %q, created %v; want failing %q",
						item.Name, item.Verified, item.Failing, item.CreationTimestamp, verified, n.CreationTimestamp, want)
				}
				if hasTaint(n, harness.StartupTaint.Key) != slices.Contains(item.Taints, "unverified") ||
					hasTaint(n, harness.UnhealthyTaint.Key) != slices.Contains(item.Taints, "unhealthy") {
					t.Errorf("%s: taints %v, server %v", item.Name, item.Taints, n.Spec.Taints)
				}
				for _, key := range []string{harness.StartupTaint.Key, harness.UnhealthyTaint.Key} {
					if hasTaint(n, key) != slices.Contains(item.TaintKeys, key) {
						t.Errorf("%s: taint keys %v, server %v", item.Name, item.TaintKeys, n.Spec.Taints)
					}
				}
				c := condition(n)
				if (c == nil) != (item.Condition == nil) || (c != nil && (item.Condition.Reason != c.Reason || item.Condition.Message != c.Message ||
					item.Condition.Status != string(c.Status))) {
					t.Errorf("%s: condition %+v, server %+v", item.Name, item.Condition, c)
				}
				if item.Cleanup.State != kubectlplugin.CleanupNone || item.Bypass || item.Finalizer {
					t.Errorf("%s: cleanup %+v bypass %t finalizer %t, want none, false, false", item.Name, item.Cleanup, item.Bypass, item.Finalizer)
				}
			}
			if seen != len(wantFailing) {
				t.Errorf("%d of the test's %d nodes in the list", seen, len(wantFailing))
			}
		}
	})

	t.Run("selector", func(t *testing.T) {
		rows := table(t, plugin(t, "status", "-l", "kubernetes.io/hostname=kp-verified").stdout)
		if len(rows) != 1 || rows[0]["NAME"] != "kp-verified" {
			t.Errorf("rows %v, want kp-verified only", rows)
		}
	})

	t.Run("why a re-tainted node", func(t *testing.T) {
		out := plugin(t, "why", "kp-broken").stdout
		for _, re := range []string{
			`(?m)^Verified:\s+false`, `(?m)^Taint:\s+unhealthy\s+\(` + regexp.QuoteMeta(harness.UnhealthyTaint.Key) + `\)`,
			`(?m)^  Status:\s+False$`, `(?m)^  Reason:\s+ChecksFailing$`, `(?m)^  Message:\s+checks failing; failing: probe; since: `,
			`(?m)^  Last transition:\s+\d{4}-`, `(?m)^  Outcome:\s+failed: probe, failing since `, `(?m)^  Continuous checks:\s+dns,api,probe$`,
			`the agent rewrites it only when\nthe outcome changes`,
			`(?m)^Events \(events.k8s.io/v1 about Node kp-broken, all namespaces, newest last\):$`,
			`(?m)^  \S+\s+Normal\s+NodeVerified\s+kube-node-ready-agent\s+1\s`,
			`(?m)^  \S+\s+Warning\s+NodeRetainted\s+kube-node-ready-agent\s+1\s`,
		} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("why kp-broken does not match %s:\n%s", re, out)
			}
		}
		if v, r := strings.Index(out, api.EventNodeVerified), strings.Index(out, api.EventNodeRetainted); v < 0 || r < v {
			t.Errorf("Events not oldest first, newest last:\n%s", out)
		}
		if limited := plugin(t, "why", "kp-broken", "--events=1").stdout; !strings.Contains(limited, api.EventNodeRetainted) ||
			strings.Contains(limited, api.EventNodeVerified) || !strings.Contains(limited, "; the last 1 of ") {
			t.Errorf("--events=1 shows not just the newest:\n%s", limited)
		}
	})

	t.Run("why a node without an agent", func(t *testing.T) {
		out := plugin(t, "why", "kp-plain").stdout
		if !strings.Contains(out, "not set: no kube-node-ready agent has reported on this node") || !strings.Contains(out, "newest last):\n  none\n") {
			t.Errorf("why kp-plain:\n%s", out)
		}
	})

	t.Run("why a node that does not exist", func(t *testing.T) {
		r := kubectl(t, "", nil, "node-ready", "why", "kp-missing")
		if r.code != 1 || r.stderr != "error: node kp-missing not found\n" || r.stdout != "" {
			t.Errorf("why kp-missing: %s; want exit 1 and 'node kp-missing not found'", r)
		}
	})
}
