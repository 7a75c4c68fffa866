//go:build e2e

package agent_test

import (
	"bufio"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var quietRounds = flag.Int("agent.quiet-rounds", 10, "how many rounds a continuous agent beside a bootstrap-only one runs while the bootstrap-only one is watched for API requests")

// TestBootstrapOnlyAgentMakesNoRequestsAfterVerification: with
// --continuous-checks= the agent verifies its node, then, at a 1 s period,
// sends the API server nothing but its node's watch while a continuous
// agent beside it runs ten rounds; it still serves its endpoints, and
// removes a startup taint that something re-adds.
func TestBootstrapOnlyAgentMakesNoRequestsAfterVerification(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	node := cp.NewNode(t, "bootstrap-only", harness.NodeOptions{})
	a := startAgent(t, node, "--continuous-checks=")
	// The twin: the same flags but continuous, so its rounds count the
	// periods in which the resting agent would have run one.
	twin := startAgent(t, cp.NewNode(t, "bootstrap-twin", harness.NodeOptions{}))
	cp.WaitNode(t, node.Name, 20*time.Second, "verified", verified)
	// The agent says so on the node, once, and then goes quiet.
	cp.WaitNode(t, node.Name, 10*time.Second, "condition Bootstrapped", func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "Bootstrapped" &&
			strings.Contains(c.Message, "bootstrap: dns,api,network,discovery")
	})
	// Its last writes are done: the Event (sent by a queue of its own) is
	// there, and the loop says it rests.
	cp.WaitEvent(t, 10*time.Second, "Node", node.Name, api.EventNodeVerified, "")
	harness.Eventually(t, 10*time.Second, "the agent says it rests", func() (bool, string) {
		return logContains(a.Process, "bootstrap-only, so no more rounds"), a.Tail(5)
	})
	since := time.Now()
	_, before := httpGet(t, a.URL("/metrics"))
	// The observation window: -agent.quiet-rounds rounds of the twin, the
	// periods in which a continuous agent made its requests. The resting
	// agent still answers below, and removes the startup taint put back
	// after the window at once, so it was live and watching throughout.
	twin.WaitCounter(t, iterations, *quietRounds, "the continuous twin's rounds", nil)

	requests := agentRequests(t, node.Name, since)
	if len(requests) > 0 {
		t.Errorf("bootstrap-only agent sent %d requests in %d rounds of its twin after verification (watch aside): %v", len(requests), *quietRounds, requests)
	}
	if twinRequests := agentRequests(t, twin.Node.Name, since); len(twinRequests) < *quietRounds {
		t.Errorf("the continuous twin sent %d requests in its %d rounds, want at least one a round: the audit log does not show them", len(twinRequests), *quietRounds)
	}
	_, after := httpGet(t, a.URL("/metrics"))
	for _, m := range []string{`node_check_duration_seconds_count{check="dns"}`, iterations.Name} {
		if got, want := metricLine(after, m), metricLine(before, m); got != want {
			t.Errorf("the agent ran rounds after verification: %s, then %s", want, got)
		}
	}
	for _, c := range []string{"dns", "api", "network", "discovery"} {
		if !strings.Contains(after, `node_check_continuous{check="`+c+`"} 0`) {
			t.Errorf("metrics do not report check %s as bootstrap", c)
		}
	}
	if code, _ := httpGet(t, a.URL("/readyz")); code != 200 {
		t.Errorf("/readyz = %d while idle", code)
	}

	// Something (a node template, Karpenter) puts the startup taint back:
	// the node never failed, so it goes again.
	n := cp.GetNode(t, node.Name)
	n.Spec.Taints = append(n.Spec.Taints, harness.StartupTaint)
	if _, err := cp.Client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, node.Name, 10*time.Second, "startup taint removed again", verified)
}

// TestContinuousCheckRetaintsOnlyOnItsOwnFailures: a node whose only
// continuous check is api is not re-tainted when its (bootstrap) dns check
// would fail, and that check never runs again; a node whose continuous
// check is dns is re-tainted by the same fault, and recovers.
func TestContinuousCheckRetaintsOnlyOnItsOwnFailures(t *testing.T) {
	apiOnly := cp.NewNode(t, "continuous-api", harness.NodeOptions{})
	dnsToo := cp.NewNode(t, "continuous-dns", harness.NodeOptions{})
	resolv := map[string]string{}
	agents := map[string]*agent{}
	for _, n := range []struct {
		node       harness.Node
		continuous string
	}{{apiOnly, "api"}, {dnsToo, "dns,api"}} {
		resolv[n.node.Name] = filepath.Join(t.TempDir(), "resolv.conf")
		b, err := os.ReadFile(cp.ResolvConf)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(resolv[n.node.Name], b, 0o644); err != nil {
			t.Fatal(err)
		}
		agents[n.node.Name] = startAgent(t, n.node, "--continuous-checks="+n.continuous,
			"--check.dns.resolv-conf="+resolv[n.node.Name], "--fleet-budget=100%")
	}
	for _, n := range []harness.Node{apiOnly, dnsToo} {
		cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	_, before := httpGet(t, agents[apiOnly.Name].URL("/metrics"))
	// Both nodes' resolvers now point where nothing answers.
	for _, path := range resolv {
		if err := os.WriteFile(path, []byte("nameserver 10.213.0.250\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp.WaitNode(t, dnsToo.Name, 20*time.Second, "re-tainted by its continuous dns check", func(n *corev1.Node) bool { return tainted(n) })
	// Why, on the node: the condition names the failing check and the modes.
	cp.WaitNode(t, dnsToo.Name, 5*time.Second, "condition ChecksFailing naming dns", func(n *corev1.Node) bool {
		c := condition(n)
		if c == nil || c.Status != corev1.ConditionFalse || c.Reason != api.ReasonChecksFailing {
			return false
		}
		m, err := api.ParseConditionMessage(c.Message)
		return err == nil && slices.Equal(m.Failing, []string{"dns"}) && !m.Since.IsZero() &&
			slices.Equal(m.Continuous, []string{"dns", "api"}) && slices.Equal(m.Bootstrap, []string{"network", "discovery", "daemonsets"})
	})
	agents[apiOnly.Name].Looped(t, 3, "more rounds on the api-only node",
		nodeHolds(t, apiOnly.Name, "verified (only api is continuous)", verified))
	_, after := httpGet(t, agents[apiOnly.Name].URL("/metrics"))
	if got, want := metricLine(after, `node_check_duration_seconds_count{check="dns"}`), metricLine(before, `node_check_duration_seconds_count{check="dns"}`); got != want {
		t.Errorf("bootstrap dns check ran after verification on %s: %s, then %s", apiOnly.Name, want, got)
	}
	if !strings.Contains(after, `node_check_continuous{check="api"} 1`) || !strings.Contains(after, `node_check_continuous{check="dns"} 0`) {
		t.Errorf("check modes not reported: %s", grepLines(after, "node_check_continuous"))
	}

	if err := os.WriteFile(resolv[dnsToo.Name], []byte(mustRead(t, cp.ResolvConf)), 0o644); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, dnsToo.Name, 20*time.Second, "verified again", verified)
	cp.WaitNode(t, dnsToo.Name, 5*time.Second, "condition ChecksPassed", func(n *corev1.Node) bool {
		c := condition(n)
		return c != nil && c.Status == corev1.ConditionTrue && c.Reason == "ChecksPassed"
	})
}

// condition is the agent's KubeNodeReady condition on n, or nil.
func condition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == "KubeNodeReady" {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// agentRequests lists the requests after since, other than watches, sent
// with a token bound to a pod on node (the audit log's user extra).
func agentRequests(t *testing.T, node string, since time.Time) []string {
	t.Helper()
	f, err := os.Open(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Stage      string    `json:"stage"`
			Verb       string    `json:"verb"`
			RequestURI string    `json:"requestURI"`
			Received   time.Time `json:"requestReceivedTimestamp"`
			User       struct {
				Extra map[string][]string `json:"extra"`
			} `json:"user"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage != "ResponseComplete" || ev.Verb == "watch" || ev.Received.Before(since) {
			continue
		}
		if nn := ev.User.Extra["authentication.kubernetes.io/node-name"]; len(nn) == 1 && nn[0] == node {
			out = append(out, ev.Verb+" "+ev.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func metricLine(metrics, prefix string) string {
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return prefix + " (absent)"
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
