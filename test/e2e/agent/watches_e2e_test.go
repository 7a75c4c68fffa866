//go:build e2e

package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// agentClusterRole is the agent's ClusterRole as the chart names it for
// harness.ChartRelease.
const agentClusterRole = harness.ChartRelease + "-agent"

// TestRefusedWatchLoggedOncePerEpisode: while the API server refuses the
// agent's EndpointSlice watches (its ClusterRole lacks the EndpointSlice
// rule, as after a bad upgrade), the agent logs one warning per watch
// however often its reflectors retry, and one line per watch when the rule
// is back and the watches are accepted again.
func TestRefusedWatchLoggedOncePerEpisode(t *testing.T) {
	n := cp.NewNode(t, "refused-watch", harness.NodeOptions{})
	restore := withoutEndpointSliceRule(t)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	// The test agents log at debug level, which shows each refused try:
	// the positive signal that the reflectors did retry. The episode's own
	// lines are a warning and an info line, all an agent at info level
	// prints of it.
	a := startAgent(t, n)
	services := []string{"kube-system/kube-dns", harness.AgentNamespace + "/" + harness.AgentPeerService}
	lines := func(svc, level, msg string) int {
		c := 0
		for _, line := range strings.Split(a.LogT(t), "\n") {
			if strings.Contains(line, `"watch":"*v1.EndpointSlice"`) && strings.Contains(line, `"service":"`+svc+`"`) &&
				strings.Contains(line, `"level":"`+level+`"`) && strings.Contains(line, `"msg":"`+msg) {
				c++
			}
		}
		return c
	}
	var tries string
	harness.Eventually(t, 60*time.Second, "three refused tries of each EndpointSlice watch", func() (bool, string) {
		reqs, _, err := fleet.Requests(cp.AuditLogPath(), offset)
		if err != nil {
			return false, err.Error()
		}
		refused := 0
		for k, c := range reqs[n.Name] {
			if k.Resource == "endpointslices" && k.Refused == 403 {
				refused += c
			}
		}
		var state []string
		done := refused >= 6
		for _, svc := range services {
			tries := lines(svc, "WARN", "watch refused") + lines(svc, "DEBUG", "watch still refused")
			done = done && tries >= 3
			state = append(state, fmt.Sprintf("%s: %d tries logged", svc, tries))
		}
		tries = fmt.Sprintf("%d refused EndpointSlice requests (audit log); %s", refused, strings.Join(state, ", "))
		return done, tries
	})
	t.Log(tries)
	restore()
	harness.Eventually(t, 60*time.Second, "each EndpointSlice watch recovered", func() (bool, string) {
		got := 0
		for _, svc := range services {
			got += min(1, lines(svc, "INFO", "watch recovered"))
		}
		return got == len(services), a.Tail(3)
	})
	cp.WaitNode(t, n.Name, 30*time.Second, "verified once the agent reads the Services", verified)
	for _, svc := range services {
		if w, ok := lines(svc, "WARN", "watch refused"), lines(svc, "INFO", "watch recovered"); w != 1 || ok != 1 {
			t.Errorf("%s: %d refused and %d recovered lines, want one each", svc, w, ok)
		}
	}
}

// TestBootstrapOnlyAgentClosesItsWatchesWhenIdle: a bootstrap-only agent
// closes its EndpointSlice watches once its node is verified (the API
// server holds no watch of it but its node's), and opens them again when
// the node must be verified again.
func TestBootstrapOnlyAgentClosesItsWatchesWhenIdle(t *testing.T) {
	node := cp.NewNode(t, "idle-watches", harness.NodeOptions{})
	// CoreDNS watches EndpointSlices too: the agent's are counted above it.
	base := openSliceWatches(t)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	a := startAgent(t, node, "--continuous-checks=")
	cp.WaitNode(t, node.Name, 20*time.Second, "verified", verified)
	// Its rounds read kube-dns's and its peers' slices through two
	// watches; the audit log records a watch when it ends.
	ended := func() int {
		reqs, _, err := fleet.Requests(cp.AuditLogPath(), offset)
		if err != nil {
			t.Fatal(err)
		}
		return reqs[node.Name][fleet.Request{Verb: "watch", Resource: "endpointslices"}]
	}
	closed := func(want int) func() (bool, string) {
		return func() (bool, string) {
			got, open := ended(), openSliceWatches(t)
			return got >= want && open == base, fmt.Sprintf("%d of the agent's EndpointSlice watches ended; %v open (%v before the agent)", got, open, base)
		}
	}
	harness.Eventually(t, 20*time.Second, "the agent idle, its two EndpointSlice watches closed", closed(2))
	if !logContains(a.Process, "bootstrap-only, so no more rounds") {
		t.Error("watches closed before the agent went idle")
	}
	before := ended()

	// The node must be verified again (re-tainted earlier, and its startup
	// taint back): the checks read the Services again, through new watches
	// (at least one: its rounds may read the peers from the network check's
	// own cache), closed again once the node is verified.
	n := cp.GetNode(t, node.Name)
	n.Labels[api.VerifiedLabel] = "false"
	n.Spec.Taints = append(n.Spec.Taints, harness.StartupTaint)
	if _, err := cp.Client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	cp.WaitNode(t, node.Name, 20*time.Second, "verified again", func(n *corev1.Node) bool {
		return verified(n) && n.Labels[api.VerifiedLabel] == "true"
	})
	harness.Eventually(t, 20*time.Second, "the new watches closed again", closed(before+1))
}

// openSliceWatches is how many EndpointSlice watches the API server holds
// open now.
func openSliceWatches(t *testing.T) float64 {
	t.Helper()
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n, err := harness.SumMetric(bytes.NewReader(body), "apiserver_longrunning_requests", `resource="endpointslices"`, `verb="WATCH"`)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// withoutEndpointSliceRule removes the EndpointSlice rule from the agent's
// ClusterRole, as rendered from the chart; the returned func (also run when
// the test ends) puts the rules back.
func withoutEndpointSliceRule(t *testing.T) (restore func()) {
	t.Helper()
	roles := cp.Client.RbacV1().ClusterRoles()
	role, err := roles.Get(t.Context(), agentClusterRole, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules := role.Rules
	role.Rules = slices.DeleteFunc(slices.Clone(rules), func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.Resources, "endpointslices")
	})
	if len(role.Rules) == len(rules) {
		t.Fatalf("ClusterRole %s grants nothing on endpointslices", agentClusterRole)
	}
	if _, err := roles.Update(t.Context(), role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := false
	restore = func() {
		if done {
			return
		}
		done = true
		r, err := roles.Get(context.Background(), agentClusterRole, metav1.GetOptions{})
		if err == nil {
			r.Rules = rules
			_, err = roles.Update(context.Background(), r, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restore ClusterRole %s: %v", agentClusterRole, err)
		}
	}
	t.Cleanup(restore)
	return restore
}
