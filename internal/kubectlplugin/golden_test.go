package kubectlplugin

import (
	"bytes"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/golden"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// fleet is one node in each state the commands tell apart.
func fleet() []corev1.Node {
	failing := condition(agent.FailingCondition([]string{"dns", "network"}, since, modes))
	return []corev1.Node{
		testNode("ip-10-0-1-7", "true", nil, condition(agent.PassingCondition(modes))),
		testNode("ip-10-0-1-8", "", []corev1.Taint{startupTaint}, failing),
		testNode("ip-10-0-1-9", "false", []corev1.Taint{unhealthyTaint}, failing),
		testNode("ip-10-0-2-1", "false", []corev1.Taint{unhealthyTaint}, condition(agent.RecoveringCondition(1, 2, modes))),
		testNode("ip-10-0-2-2", "true", nil, condition(agent.BypassedCondition(api.SkipVerificationAnnotation)), annotate(api.SkipVerificationAnnotation, "true")),
		testNode("ip-10-0-2-3", "true", nil, condition(agent.PassingCondition(modes)), deleting,
			annotate(api.CleanupStatusAnnotation, `{"attempt":2,"plugins":{"volumeattachments":"done","local-volumes":"done","portworx":"failed: portworx: decommission node ip-10-0-2-3: HTTP 500","notify":"done","log":"skipped: after portworx failed"},"retryIn":"20s"}`)),
		testNode("ip-10-0-2-4", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `{"attempt":1,"plugins":{"volumeattachments":"running","portworx":"pending"}}`),
			annotate(api.SkipCleanupAnnotation, "true")),
		testNode("ip-10-0-2-5", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `{"attempt":1,"plu`)),
		testNode("ip-10-0-2-6", "true", nil, nil, deleting),
		testNode("ip-10-0-2-7", "true", nil, nil, annotate(api.SkipCleanupAnnotation, "true")),
	}
}

func TestGoldenStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		wide bool
	}{{"status.txt", false}, {"status-wide.txt", true}} {
		var buf bytes.Buffer
		if err := PrintStatus(&buf, Reports(fleet(), PresetTaintKeys()), tt.wide, now); err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, tt.name, buf.Bytes())
	}
}

func TestGoldenCleanupStatus(t *testing.T) {
	var buf bytes.Buffer
	if err := PrintCleanup(&buf, InCleanup(Reports(fleet(), PresetTaintKeys())), now); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "cleanup-status.txt", buf.Bytes())
}

func TestGoldenStatusJSON(t *testing.T) {
	nodes := fleet()
	var buf bytes.Buffer
	if err := PrintList(&buf, Reports([]corev1.Node{nodes[2], nodes[5]}, PresetTaintKeys()), OutputJSON); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "status.json", buf.Bytes())
}

func TestGoldenWhy(t *testing.T) {
	ev := func(reason, typ, note string, ago time.Duration, count int32) eventsv1.Event {
		e := eventsv1.Event{Reason: reason, Type: typ, Note: note, ReportingController: "kube-node-ready-agent",
			EventTime: metav1.NewMicroTime(now.Add(-ago))}
		if count > 1 {
			e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(now.Add(-ago / 2))}
		}
		return e
	}
	events := []eventsv1.Event{
		ev(api.EventNodeRetainted, "Warning", "re-tainted after 3 failed rounds: dns, network", 57*time.Minute, 1),
		ev(api.EventNodeVerified, "Normal", "verified in 14.2s", 25*time.Hour, 1),
		{Reason: "NodeReady", Type: "Normal", Note: "Node ip-10-0-1-9 status is now: NodeReady", DeprecatedSource: corev1.EventSource{Component: "kubelet"},
			DeprecatedLastTimestamp: metav1.NewTime(now.Add(-26 * time.Hour))},
		ev(api.EventRetaintSuppressed, "Warning", "fleet budget: 1 of 1 nodes re-tainted", 50*time.Minute, 12),
	}
	nodes := fleet()
	for _, tt := range []struct {
		file string
		node corev1.Node
		why  func(*Why)
	}{
		{"why-retainted.txt", nodes[2], func(w *Why) { w.Events, w.EventsTotal = text.EventLines(events, 3) }},
		{"why-no-agent.txt", testNode("ip-10-0-3-1", "", []corev1.Taint{startupTaint}, nil), func(w *Why) {}},
		{"why-deleting-events-forbidden.txt", nodes[5], func(w *Why) {
			w.EventsErr = `not allowed to list events.events.k8s.io: events.events.k8s.io is forbidden: User "jane" cannot list resource "events" in API group "events.k8s.io" in the namespace "default"`
		}},
	} {
		why := Why{Report: Report(&tt.node, PresetTaintKeys()), Keys: PresetTaintKeys(), EventsScope: "all namespaces"}
		tt.why(&why)
		var buf bytes.Buffer
		if err := PrintWhy(&buf, why, now); err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, tt.file, buf.Bytes())
	}
}

// customKeys are the keys status reads from an agent DaemonSet given its
// own startup taint and a previous key, besides the presets' (the none
// preset's unhealthy key).
func customKeys(t *testing.T) TaintKeys {
	t.Helper()
	c, err := cli.TaintFlags{Autoscaler: api.PresetNone, Startup: "example.com/booting=true:NoSchedule", Previous: []string{"example.com/old-boot"}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	keys := PresetTaintKeys()
	keys.Add(c)
	return keys
}

// keyed is a node carrying one taint with key, as the agent writes it.
func keyed(name, verified, key string) corev1.Node {
	taint := corev1.Taint{Key: key, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	return testNode(name, verified, []corev1.Taint{taint}, condition(agent.FailingCondition([]string{"dns"}, since, modes)))
}

// keyedFleet is a node tainted under each preset and under the custom
// keys of customKeys, and one with another's taint.
func keyedFleet() []corev1.Node {
	return []corev1.Node{
		keyed("ca-startup", "", api.CAStartupTaintKey),
		keyed("ca-status", "false", api.CAStatusTaintKey),
		keyed("custom-previous", "", "example.com/old-boot"),
		keyed("custom-startup", "", "example.com/booting"),
		keyed("karpenter-startup", "", api.KarpenterStartupTaintKey),
		keyed("not-ours", "true", "example.com/gpu"),
		keyed("seed-startup", "", api.StartupTaintKey),
	}
}

// TestGoldenStatusKeys: every preset's keys and the deployed agent's own
// name a node's taint; presets-only leaves the custom keys unnamed.
func TestGoldenStatusKeys(t *testing.T) {
	for _, tt := range []struct {
		file string
		keys TaintKeys
	}{{"status-keys.txt", customKeys(t)}, {"status-keys-presets.txt", PresetTaintKeys()}} {
		var buf bytes.Buffer
		if err := PrintStatus(&buf, Reports(keyedFleet(), tt.keys), false, now); err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, tt.file, buf.Bytes())
	}
}

// TestGoldenWhyKeys: why names the key a node carries, a custom one
// among them, and lists the keys a node carries none of.
func TestGoldenWhyKeys(t *testing.T) {
	keys := customKeys(t)
	for _, tt := range []struct {
		file string
		node corev1.Node
	}{
		{"why-ca-startup.txt", keyed("ca-startup", "", api.CAStartupTaintKey)},
		{"why-karpenter-startup.txt", keyed("karpenter-startup", "", api.KarpenterStartupTaintKey)},
		{"why-custom-startup.txt", keyed("custom-startup", "", "example.com/booting")},
		{"why-no-taint.txt", keyed("not-ours", "true", "example.com/gpu")},
	} {
		why := Why{Report: Report(&tt.node, keys), Keys: keys, EventsScope: "all namespaces"}
		var buf bytes.Buffer
		if err := PrintWhy(&buf, why, now); err != nil {
			t.Fatal(err)
		}
		golden.Compare(t, tt.file, buf.Bytes())
	}
}

// TestGoldenStatusObserve: in observe mode status says, per node, the taint
// enforce would have on it and since when, beside none on the node.
func TestGoldenStatusObserve(t *testing.T) {
	hold := api.ConditionMessage{Summary: "observe mode: enforce would hold this new node with the startup taint until its checks pass",
		Failing: []string{"extendedresources"}, Since: since, HasModes: true, Continuous: []string{"dns"}, Bootstrap: []string{"extendedresources"}}
	retaint := api.ConditionMessage{Summary: "observe mode: enforce would have re-tainted this node",
		Failing: []string{"dns"}, Since: since.Add(time.Minute), HasModes: true, Continuous: []string{"dns"}}
	nodes := []corev1.Node{
		testNode("observe-dns", "true", nil, condition(agent.ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonWouldRetaint, Message: retaint.String()})),
		testNode("observe-gate", "", nil, condition(agent.ConditionState{Status: corev1.ConditionFalse, Reason: api.ReasonWouldHold, Message: hold.String()})),
		testNode("observe-ok", "true", nil, condition(agent.PassingCondition(modes))),
	}
	var buf bytes.Buffer
	if err := PrintStatus(&buf, Reports(nodes, PresetTaintKeys()), true, now); err != nil {
		t.Fatal(err)
	}
	golden.Compare(t, "status-observe.txt", buf.Bytes())
}
