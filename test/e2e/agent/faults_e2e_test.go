//go:build e2e

package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestAPIServerRestartRetaintsNothing restarts kube-apiserver (same etcd,
// down 12 s) under agents checking every second. Rounds during the outage
// and while the new server warms up are not the nodes' failures: no node is
// re-tainted, though every agent saw failing rounds.
func TestAPIServerRestartRetaintsNothing(t *testing.T) {
	agents := startFleet(t, "restart", 3, "--fleet-budget=100%")
	for _, a := range agents {
		n := a.Node
		cp.WaitNode(t, n.Name, 20*time.Second, "verified", verified)
	}
	if err := cp.RestartAPIServer(t.Context(), 12*time.Second); err != nil {
		t.Fatal(err)
	}
	// Every round now would pass; give the agents ten rounds to make any
	// mistake, each node verified all along.
	harness.WaitCounters(t, daemons(agents), iterations, 10, "rounds after the restart", func() (bool, string) {
		for _, a := range agents {
			n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), a.Node.Name, metav1.GetOptions{})
			if err == nil && !verified(n) {
				return false, fmt.Sprintf("node %s after the restart: taints %v, label %q", a.Node.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
			}
		}
		return true, ""
	})
	for _, a := range agents {
		if n := cp.GetNode(t, a.Node.Name); !verified(n) {
			t.Errorf("node %s after the restart: taints %v, label %q", a.Node.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
		}
		if got := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`, `result="success"`); got != 0 {
			t.Errorf("agent %s re-tainted its node %v times during the restart", a.Node.Name, got)
		}
		if got := a.Metric(t, "node_ready_rounds_skipped_total"); got == 0 {
			t.Errorf("agent %s counted no round as a control-plane fault while the API server was down", a.Node.Name)
		}
		if !logContains(a.Process, "control-plane fault") {
			t.Errorf("agent %s did not log the control-plane fault", a.Node.Name)
		}
		if n := logCount(a.Process, "control-plane fault: failed rounds do not count"); n > 1 {
			t.Errorf("agent %s logged the fault %d times; once per outage is enough", a.Node.Name, n)
		}
	}
}

// TestFrozenAPIServerKeepsLiveConnections: kube-apiserver stops answering
// while its host still acknowledges every packet (frozen with SIGSTOP, as a
// server starved of CPU or stuck is), so even /readyz gets no answer. The
// agents skip those rounds, and keep their connections, which are alive:
// none is dropped, so no watch ends and none starts again when the server
// answers. Dropping live connections would add every agent's TLS handshake
// and watches to an overloaded server's load (at 10 000 nodes, hundreds of
// agents a minute did). A partition, whose connections stall, still drops
// them (test/e2e/faults, api-server-cut).
func TestFrozenAPIServerKeepsLiveConnections(t *testing.T) {
	agents := startFleet(t, "frozen", 2, "--fleet-budget=100%")
	for _, a := range agents {
		cp.WaitNode(t, a.Node.Name, 20*time.Second, "verified", verified)
	}
	// The bootstrap gates' watches end once the nodes are verified.
	harness.WaitCounters(t, daemons(agents), iterations, 2, "rounds after the verification", nil)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]float64{}
	for _, a := range agents {
		skipped[a.Node.Name] = a.Metric(t, "node_ready_rounds_skipped_total")
	}
	apiserver := cp.APIServer()
	if err := apiserver.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	thaw := func() {
		if frozen {
			frozen = false
			if err := apiserver.Signal(syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw)
	harness.Eventually(t, 30*time.Second, "two rounds skipped by each agent", func() (bool, string) {
		var state []string
		done := true
		for _, a := range agents {
			s := a.Metric(t, "node_ready_rounds_skipped_total") - skipped[a.Node.Name]
			done = done && s >= 2
			state = append(state, fmt.Sprintf("%s: %v", a.Node.Name, s))
		}
		return done, "rounds skipped: " + strings.Join(state, ", ")
	})
	thaw()
	harness.WaitCounters(t, daemons(agents), iterations, 3, "rounds after the thaw", nil)
	for _, a := range agents {
		if n := cp.GetNode(t, a.Node.Name); !verified(n) {
			t.Errorf("node %s after the freeze: taints %v, label %q", a.Node.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
		}
		if logContains(a.Process, "dropped connections") {
			t.Errorf("agent %s dropped live connections to a frozen API server", a.Node.Name)
		}
	}
	reqs, _, err := fleet.Requests(cp.AuditLogPath(), offset)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range agents {
		for k, c := range reqs[a.Node.Name] {
			// The watches a verified node's agent keeps: its node, the
			// kube-dns and peer EndpointSlices.
			if (k.Verb == "watch" || k.Verb == "list") && (k.Resource == "nodes" || k.Resource == "endpointslices") {
				t.Errorf("agent %s: %d× %s after the freeze (audit log): a watch ended, its connection dropped", a.Node.Name, c, k)
			}
		}
	}
}

// TestAPIServerThrottlingRetaintsNothing: the real kube-apiserver's flow
// control (API Priority and Fairness) gives the agents' reads of their nodes
// no seat, so it queues them past the api check's timeout, while /readyz,
// exempt, answers: an overloaded API server, as a fleet's agents see it
// during an outage at 10 000 nodes. Those rounds are control-plane faults,
// not the nodes' failures: no node is re-tainted (the budget allows all).
func TestAPIServerThrottlingRetaintsNothing(t *testing.T) {
	agents := startFleet(t, "throttle", 2, "--fleet-budget=100%")
	for _, a := range agents {
		cp.WaitNode(t, a.Node.Name, 20*time.Second, "verified", verified)
	}
	starveAgentNodeReads(t)
	// Ten rounds of every agent, each with its read held: three would
	// re-taint if they counted.
	harness.WaitCounters(t, daemons(agents), iterations, 10, "rounds with the reads starved", nil)
	for _, a := range agents {
		if n := cp.GetNode(t, a.Node.Name); !verified(n) {
			t.Errorf("node %s with its agent's reads starved: taints %v, label %q", a.Node.Name, n.Spec.Taints, n.Labels["node-ready/verified"])
		}
		if got := a.Metric(t, "node_ready_taint_operations_total", `operation="add"`, `result="success"`); got != 0 {
			t.Errorf("agent %s re-tainted its node %v times while the API server starved its reads", a.Node.Name, got)
		}
		if got := a.Metric(t, "node_ready_rounds_skipped_total"); got < 3 {
			t.Errorf("agent %s skipped %v rounds as control-plane faults, want at least 3", a.Node.Name, got)
		}
		if !logContains(a.Process, "answers /readyz but not the api check") {
			t.Errorf("agent %s did not log why its rounds did not count", a.Node.Name)
		}
	}
}

// starveAgentNodeReads gives every ServiceAccount's get of a Node a priority
// level without seats, whose requests wait in its queue until they time
// out, until the test ends.
func starveAgentNodeReads(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	const name = "knr-test-starved"
	fc := cp.Client.FlowcontrolV1()
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr.To[int32](0),
				LendablePercent:          ptr.To[int32](0),
				BorrowingLimitPercent:    ptr.To[int32](0),
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 100},
				},
			},
		},
	}
	if _, err := fc.PriorityLevelConfigurations().Create(ctx, pl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: name},
			MatchingPrecedence:         100,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "system:serviceaccounts"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"nodes"}, ClusterScope: true,
				}},
			}},
		},
	}
	if _, err := fc.FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fc.FlowSchemas().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = fc.PriorityLevelConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// The API server takes the new configuration in a moment: wait until
	// it says it matched the schema.
	harness.Eventually(t, 30*time.Second, "FlowSchema "+name+" in use", func() (bool, string) {
		got, err := fc.FlowSchemas().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse, fmt.Sprintf("Dangling=%s", c.Status)
			}
		}
		return false, "no Dangling condition yet"
	})
}

// TestConditionGate: with --require-conditions the startup taint stays
// until the node reports the conditions, and the agent says why on the node;
// the change of condition untaints at once, not at the next backoff step.
func TestConditionGate(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	n := cp.NewNode(t, "cond-gate", harness.NodeOptions{})
	setConditions(t, n.Name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady"})
	a := startAgent(t, n, "--require-conditions=Ready=True,NetworkUnavailable=False", "--require-conditions.absent=pass",
		"--initial-backoff=1s", "--initial-tries=3", "--check-period=30s")
	cp.WaitNode(t, n.Name, 10*time.Second, "condition explains the wait", func(n *corev1.Node) bool {
		return strings.Contains(agentCondition(n).Message, "conditions")
	})
	a.Looped(t, 2, "rounds with Ready=False", nodeHolds(t, n.Name, "tainted while Ready=False", tainted))
	if c := agentCondition(cp.GetNode(t, n.Name)); c.Status != corev1.ConditionFalse || !strings.Contains(c.Message, "failing: conditions") {
		t.Errorf("KubeNodeReady = %s %s: %q, want False naming the conditions gate", c.Status, c.Reason, c.Message)
	}
	if !logContains(a.Process, "Ready is False, want True (KubeletNotReady)") {
		t.Error("agent log does not say which condition is unmet")
	}
	// The start-up backoff has run out, so the next round is 30 s away: only
	// the wake on the node's change can untaint it this soon.
	harness.Eventually(t, 20*time.Second, "the start-up backoff ran out", func() (bool, string) {
		v, err := a.TryMetric("node_ready_initial_retries_exhausted_total")
		return err == nil && v >= 1, fmt.Sprintf("node_ready_initial_retries_exhausted_total %v (%v)", v, err)
	})
	setConditions(t, n.Name, corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"})
	cp.WaitNode(t, n.Name, 5*time.Second, "verified after Ready=True", verified)
}

// agentCondition returns the agent's KubeNodeReady condition of n.
func agentCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == "KubeNodeReady" {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// setConditions writes conditions into the node's status as the kubelet or
// node-problem-detector would (a strategic merge by type).
func setConditions(t *testing.T, node string, conds ...corev1.NodeCondition) {
	t.Helper()
	now := metav1.NewTime(time.Now())
	for i := range conds {
		conds[i].LastHeartbeatTime, conds[i].LastTransitionTime = now, now
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": conds}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestProbeCheck: the probe check holds the startup taint while a
// configured health endpoint answers 503, names it on the node, and lets
// the node go once it answers 200.
func TestProbeCheck(t *testing.T) {
	t.Parallel() // independent: see main_e2e_test.go
	var healthy atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			http.Error(w, "cni not ready", http.StatusServiceUnavailable)
		}
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	target := "http://" + ln.Addr().String() + "/healthz"

	n := cp.NewNode(t, "probe", harness.NodeOptions{})
	startAgent(t, n, "--checks=dns,api,probe", "--check.probe.targets="+target+"#status=200&timeout=500ms")
	cp.WaitNode(t, n.Name, 10*time.Second, "probe failure on the node", func(n *corev1.Node) bool {
		c := agentCondition(n)
		return strings.Contains(c.Message, "failing: probe")
	})
	if !tainted(cp.GetNode(t, n.Name)) {
		t.Fatal("node untainted while its probe target answers 503")
	}
	healthy.Store(true)
	cp.WaitNode(t, n.Name, 10*time.Second, "verified once the probe target answers 200", verified)
}
