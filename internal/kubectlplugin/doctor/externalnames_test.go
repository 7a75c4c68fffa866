package doctor

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/workloadtest"
)

// nameEvent is an Event the webhook's pod records about an external name.
func nameEvent(pod, reason, name string, at time.Time, count int32) eventsv1.Event {
	e := eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: workloadtest.Namespace, Name: pod + "." + name + "." + reason},
		Regarding:  corev1.ObjectReference{Kind: "Pod", Namespace: workloadtest.Namespace, Name: pod},
		Reason:     reason, Action: name, Type: corev1.EventTypeWarning,
		ReportingController: "kube-node-ready-webhook",
		EventTime:           metav1.NewMicroTime(at),
		Note:                "external name " + name + " does not resolve from this pod: server answered NXDOMAIN",
	}
	if reason == api.EventExternalNameResolved {
		e.Type, e.Note = corev1.EventTypeNormal, "external name "+name+" resolves from this pod"
	}
	if count > 1 {
		e.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(at)}
		e.EventTime = metav1.NewMicroTime(at.Add(-time.Hour))
	}
	return e
}

// TestDoctorSaysWhichExternalNameDoesNotResolve: doctor judges each of the
// webhook's external names by the newest outcome among its pods' Events; a
// newer pod's success ends an older pod's failure, another Deployment's
// pods and names not configured do not count, a name without an Event is
// not judged; a failure is a problem with both fixes.
func TestDoctorSaysWhichExternalNameDoesNotResolve(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	old, cur := "kube-node-ready-webhook-5d9f-aaaaa", "kube-node-ready-webhook-7c4b-bbbbb"
	f := doctorFake(api.StartupTaint, api.UnhealthyTaint, []string{"--" + api.ExternalNamesFlag + "=down.example,back.example,quiet.example"})
	f.events = map[string][]eventsv1.Event{workloadtest.Namespace: {
		nameEvent(cur, api.EventExternalNameUnresolved, "down.example", t0.Add(2*time.Minute), 5),
		// Listed newest first: the order of a list says nothing.
		nameEvent(cur, api.EventExternalNameResolved, "back.example", t0.Add(time.Minute), 1),
		nameEvent(old, api.EventExternalNameUnresolved, "back.example", t0, 30),
		nameEvent("other-webhook-1-ccccc", api.EventExternalNameUnresolved, "back.example", t0.Add(3*time.Minute), 2),
		nameEvent(cur, api.EventExternalNameUnresolved, "unlisted.example", t0.Add(3*time.Minute), 2),
	}}
	code, out, errOut, _ := run(f, "", "doctor")
	if code != ExitError {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, ExitError, out, errOut)
	}
	for _, want := range []string{
		"problem: down.example does not resolve from webhook pod " + cur + " (kube-node-ready/kube-node-ready-webhook)",
		"5 times, last at 2026-11-28T08:02:00Z: external name down.example does not resolve from this pod: server answered NXDOMAIN",
		"make the cluster resolve it",
		"helm upgrade kube-node-ready " + PublishedChart + " --version 0.1.0 --namespace kube-node-ready --reset-then-reuse-values --set 'agent.dns.externalNames={back.example,quiet.example}'",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"back.example does not resolve", "quiet.example does not resolve", "unlisted.example"} {
		if strings.Contains(out, not) {
			t.Errorf("doctor output has %q:\n%s", not, out)
		}
	}

	// The newer success of down.example, from another replica: no problem left.
	f.events[workloadtest.Namespace] = append(f.events[workloadtest.Namespace], nameEvent(old, api.EventExternalNameResolved, "down.example", t0.Add(3*time.Minute), 1))
	if code, out, errOut, _ := run(f, "", "doctor"); code != ExitOK || strings.Contains(out, "does not resolve") {
		t.Errorf("every name's newest outcome resolved: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// Events not readable: the verdict is incomplete, and says on what.
	f.forbid = map[string]bool{"list events " + workloadtest.Namespace: true}
	code, out, errOut, _ = run(f, "", "doctor")
	if code != ExitIncomplete || !strings.Contains(out+errOut, "external names is not known") {
		t.Errorf("events forbidden: exit %d, want %d naming the external names\nstdout:\n%s\nstderr:\n%s", code, ExitIncomplete, out, errOut)
	}

	// No external names configured: no Events read at all.
	f = doctorFake(api.StartupTaint, api.UnhealthyTaint, nil)
	f.forbid = map[string]bool{"list events " + workloadtest.Namespace: true}
	if code, out, errOut, _ := run(f, "", "doctor"); code != ExitOK {
		t.Errorf("no external names, events forbidden: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
