package kubectlplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
)

// fakeAPI is API on a map of nodes; patches are applied as the API server
// applies a merge patch, with the UID precondition.
type fakeAPI struct {
	nodes   map[string]*corev1.Node
	events  map[string][]eventsv1.Event // by namespace
	patches []string
	// forbid maps "verb resource" (like "patch nodes", "list events") to
	// refuse, and for list events in which namespace ("*" for all).
	forbid map[string]bool
	// listed records the namespaces Events were listed in.
	listed []string
	// daemonSets and deployments are the workloads the commands look for
	// ours among; "list daemonsets.apps *" in forbid refuses listing them
	// in all namespaces. doctor's own reads (its tests have a fuller
	// fake) find nothing here: no revisions, no NodePools or
	// NodeReadinessRules served.
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment
}

func newFake(nodes ...corev1.Node) *fakeAPI {
	f := &fakeAPI{nodes: map[string]*corev1.Node{}, events: map[string][]eventsv1.Event{}, forbid: map[string]bool{}}
	for i := range nodes {
		f.nodes[nodes[i].Name] = &nodes[i]
	}
	return f
}

var nodesResource = schema.GroupResource{Resource: "nodes"}

func (f *fakeAPI) GetNode(_ context.Context, name string) (*corev1.Node, error) {
	if f.forbid["get nodes"] {
		return nil, explain(apierrors.NewForbidden(nodesResource, name, errors.New("RBAC says no")), "get", "nodes", name)
	}
	n, ok := f.nodes[name]
	if !ok {
		return nil, explain(apierrors.NewNotFound(nodesResource, name), "get", "nodes", name)
	}
	return n.DeepCopy(), nil
}

func (f *fakeAPI) ListNodes(_ context.Context, selector string) ([]corev1.Node, error) {
	if f.forbid["list nodes"] {
		return nil, explain(apierrors.NewForbidden(nodesResource, "", errors.New("RBAC says no")), "list", "nodes", "")
	}
	var out []corev1.Node
	for _, n := range f.nodes {
		if selector == "" || n.Labels[strings.Split(selector, "=")[0]] == strings.Split(selector, "=")[1] {
			out = append(out, *n.DeepCopy())
		}
	}
	return out, nil
}

func (f *fakeAPI) PatchNode(_ context.Context, name string, patch []byte) error {
	if f.forbid["patch nodes"] {
		return explain(apierrors.NewForbidden(nodesResource, name, errors.New("RBAC says no")), "patch", "nodes", name)
	}
	n, ok := f.nodes[name]
	if !ok {
		return explain(apierrors.NewNotFound(nodesResource, name), "patch", "nodes", name)
	}
	var p struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return err
	}
	if p.Metadata.UID != string(n.UID) {
		return explain(apierrors.NewConflict(nodesResource, name, errors.New("uid precondition")), "patch", "nodes", name)
	}
	f.patches = append(f.patches, string(patch))
	orig, err := json.Marshal(n)
	if err != nil {
		return err
	}
	patched, err := jsonpatch.MergePatch(orig, patch)
	if err != nil {
		return err
	}
	var out corev1.Node
	if err := json.Unmarshal(patched, &out); err != nil {
		return err
	}
	f.nodes[name] = &out
	return nil
}

func (f *fakeAPI) ListPodEvents(_ context.Context, namespace string) ([]eventsv1.Event, error) {
	if f.forbid["list events "+namespace] {
		return nil, explain(apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("RBAC says no")), "list", "events.events.k8s.io"+scope(namespace), "")
	}
	var out []eventsv1.Event
	for _, e := range f.events[namespace] {
		if e.Regarding.Kind == "Pod" {
			out = append(out, e)
		}
	}
	return out, nil
}

func (f *fakeAPI) ListNodeEvents(_ context.Context, namespace, name string) ([]eventsv1.Event, error) {
	f.listed = append(f.listed, namespace)
	key := namespace
	if key == "" {
		key = "*"
	}
	if f.forbid["list events "+key] {
		return nil, explain(apierrors.NewForbidden(schema.GroupResource{Group: "events.k8s.io", Resource: "events"}, "", errors.New("RBAC says no")), "list", "events.events.k8s.io", "")
	}
	var out []eventsv1.Event
	for ns, evs := range f.events {
		if namespace != "" && ns != namespace {
			continue
		}
		for _, e := range evs {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == name {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// listIn lists items in namespace ("" for all) unless forbid refuses
// listing resource there.
func listIn[T any](f *fakeAPI, resource, namespace string, items []T, ns func(*T) string) ([]T, error) {
	key := namespace
	if key == "" {
		key = "*"
	}
	if f.forbid["list "+resource+" "+key] {
		group, res, _ := strings.Cut(resource, ".")
		return nil, explain(apierrors.NewForbidden(schema.GroupResource{Group: res, Resource: group}, "", errors.New("RBAC says no")), "list", resource+scope(namespace), "")
	}
	var out []T
	for i := range items {
		if namespace == "" || ns(&items[i]) == namespace {
			out = append(out, items[i])
		}
	}
	return out, nil
}

func (f *fakeAPI) ListDaemonSets(_ context.Context, namespace string) ([]appsv1.DaemonSet, error) {
	return listIn(f, "daemonsets.apps", namespace, f.daemonSets, func(d *appsv1.DaemonSet) string { return d.Namespace })
}

func (f *fakeAPI) ListDeployments(_ context.Context, namespace string) ([]appsv1.Deployment, error) {
	return listIn(f, "deployments.apps", namespace, f.deployments, func(d *appsv1.Deployment) string { return d.Namespace })
}

func (f *fakeAPI) ListControllerRevisions(context.Context, string) ([]appsv1.ControllerRevision, error) {
	return nil, nil
}

func (f *fakeAPI) ListNodePools(context.Context) ([]doctor.NodePool, bool, error) {
	return nil, false, nil
}

func (f *fakeAPI) ListNodeReadinessRules(context.Context) ([]doctor.ReadinessRule, bool, error) {
	return nil, false, nil
}

// run runs the plugin on fapi with args and stdin.
func run(fapi *fakeAPI, stdin string, args ...string) (code int, stdout, stderr string, conn *Connection) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), args, Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Connect: func(c *Connection) (API, string, bool, error) {
			conn = c
			if ns := c.Overrides.Context.Namespace; ns != "" {
				return fapi, ns, true, nil
			}
			return fapi, "default", false, nil
		},
		Now: func() time.Time { return now },
	})
	return code, out.String(), errOut.String(), conn
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantOut    string
		wantErrOut string
	}{
		{name: "no command: the help", args: nil, wantOut: "Commands:\n  status "},
		{name: "--help lists every command", args: []string{"--help"}, wantOut: "cleanup skip NODE"},
		{name: "--help lists the connection flags", args: []string{"-h"}, wantOut: "--context string"},
		{name: "help COMMAND", args: []string{"help", "why"}, wantOut: "kubectl node-ready why NODE [--events N]"},
		{name: "COMMAND --help", args: []string{"why", "--help"}, wantOut: "--events int"},
		{name: "nested COMMAND --help", args: []string{"cleanup", "skip", "-h"}, wantOut: "[y/N]"},
		{name: "group help", args: []string{"cleanup", "--help"}, wantOut: "kubectl node-ready cleanup status"},
		{name: "doctor --help", args: []string{"doctor", "--help"}, wantOut: "3 something it needs could\nnot be read"},
		{name: "doctor takes no wide", args: []string{"doctor", "-o", "wide"}, wantCode: ExitUsage, wantErrOut: `--output "wide": doctor takes json, yaml`},
		{name: "version", args: []string{"--version"}, wantOut: "kubectl-node_ready dev"},
		{name: "group without command", args: []string{"cleanup"}, wantCode: ExitUsage, wantErrOut: "cleanup needs a command: status or skip"},
		{name: "unknown group command", args: []string{"cleanup", "nuke"}, wantCode: ExitUsage, wantErrOut: `unknown command "nuke" for cleanup`},
		{name: "unknown command", args: []string{"nope"}, wantCode: ExitUsage, wantErrOut: `unknown command "nope"`},
		{name: "unknown flag", args: []string{"status", "--bogus"}, wantCode: ExitUsage, wantErrOut: "unknown flag: --bogus"},
		{name: "flag of another command", args: []string{"status", "--yes"}, wantCode: ExitUsage,
			wantErrOut: "error: --yes: flag does not apply to status\nSee 'kubectl node-ready status --help'."},
		{name: "missing node", args: []string{"why"}, wantCode: ExitUsage, wantErrOut: "why needs one NODE, got 0 arguments"},
		{name: "two nodes", args: []string{"bypass", "a", "b"}, wantCode: ExitUsage, wantErrOut: "bypass needs one NODE, got 2 arguments"},
		{name: "argument to status", args: []string{"status", "a"}, wantCode: ExitUsage, wantErrOut: `status takes no arguments, got ["a"]`},
		{name: "bad output", args: []string{"status", "-o", "xml"}, wantCode: ExitUsage, wantErrOut: `--output "xml": status takes wide, json, yaml`},
		{name: "wide is status only", args: []string{"cleanup", "status", "-o", "wide"}, wantCode: ExitUsage, wantErrOut: `--output "wide": cleanup status takes json, yaml`},
		{name: "negative events", args: []string{"why", "a", "--events=-1"}, wantCode: ExitUsage, wantErrOut: "--events -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut, conn := run(newFake(), "", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if !strings.Contains(out, tt.wantOut) || !strings.Contains(errOut, tt.wantErrOut) {
				t.Errorf("stdout %q\nstderr %q\nwant %q and %q", out, errOut, tt.wantOut, tt.wantErrOut)
			}
			if conn != nil {
				t.Error("connected to the API server for help or a bad command line")
			}
		})
	}
}

func TestConnectionFlagsAreKubectls(t *testing.T) {
	// Flags go before and after the command, as with kubectl.
	code, _, errOut, conn := run(newFake(testNode("a", "true", nil, nil)), "",
		"--context", "prod", "why", "a", "--kubeconfig=/k", "-n", "ns", "--request-timeout", "5s", "--as", "bob",
		"--as-group", "ops", "-s", "https://api.example:6443", "--token", "t", "--cluster", "c", "--user", "u", "--insecure-skip-tls-verify")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	o := conn.Overrides
	if conn.Kubeconfig != "/k" || o.CurrentContext != "prod" || o.Context.Namespace != "ns" || o.Timeout != "5s" ||
		o.AuthInfo.Impersonate != "bob" || len(o.AuthInfo.ImpersonateGroups) != 1 || o.ClusterInfo.Server != "https://api.example:6443" ||
		o.AuthInfo.Token != "t" || o.Context.Cluster != "c" || o.Context.AuthInfo != "u" || !o.ClusterInfo.InsecureSkipTLSVerify {
		t.Errorf("connection %+v: the flags did not all arrive", conn)
	}
}

func TestStatusCommand(t *testing.T) {
	failing := condition(agentFailing())
	fapi := newFake(
		testNode("b", "false", []corev1.Taint{unhealthyTaint}, failing),
		testNode("a", "true", nil, nil, func(n *corev1.Node) { n.Labels["pool"] = "x" }),
		testNode("c", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `garbage`)),
	)
	t.Run("table", func(t *testing.T) {
		code, out, _, _ := run(fapi, "", "status")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "a ") || !strings.HasPrefix(lines[3], "c ") ||
			!strings.Contains(lines[3], "deleting: status unreadable") {
			t.Errorf("exit %d, output:\n%s\nwant a header and a, b, c by name, c unreadable", code, out)
		}
	})
	t.Run("selector", func(t *testing.T) {
		code, out, _, _ := run(fapi, "", "status", "-l", "pool=x")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "a ") {
			t.Errorf("exit %d, output:\n%s\nwant only a", code, out)
		}
		code, out, errOut, _ := run(fapi, "", "status", "-l", "pool=none")
		if code != 0 || out != "" || errOut != "No nodes found matching pool=none.\n" {
			t.Errorf("no match: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			code, out, _, _ := run(fapi, "", "status", "-o", format)
			var l List
			if err := yaml.Unmarshal([]byte(out), &l); err != nil || code != 0 {
				t.Fatalf("exit %d, %v:\n%s", code, err, out)
			}
			if l.APIVersion != ListAPIVersion || l.Kind != ListKind || len(l.Items) != 3 {
				t.Fatalf("list %+v: want 3 items of %s %s", l, ListAPIVersion, ListKind)
			}
			b := l.Items[1]
			if b.Name != "b" || b.Verified != "false" || strings.Join(b.Taints, ",") != "unhealthy" || strings.Join(b.Failing, ",") != "dns" ||
				b.Condition == nil || b.Condition.Reason != api.ReasonChecksFailing || !b.Finalizer || b.Cleanup.State != CleanupNone {
				t.Errorf("item b = %+v", b)
			}
			c := l.Items[2]
			if c.Cleanup.State != CleanupDeleting || c.Cleanup.StatusError == "" || c.Cleanup.DeletionTimestamp == nil {
				t.Errorf("item c cleanup = %+v, want deleting with an unreadable status", c.Cleanup)
			}
		})
	}
	t.Run("forbidden", func(t *testing.T) {
		fapi := newFake()
		fapi.forbid["list nodes"] = true
		code, _, errOut, _ := run(fapi, "", "status")
		if code != ExitError || !strings.Contains(errOut, "error: not allowed to list nodes: ") {
			t.Errorf("exit %d, stderr %q: want 1 naming the verb and resource", code, errOut)
		}
	})
}

func TestCleanupStatusCommand(t *testing.T) {
	fapi := newFake(
		testNode("a", "true", nil, nil),
		testNode("b", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `{"attempt":3,"plugins":{"volumeattachments":"done","portworx":"failed: HTTP 500"},"retryIn":"4s"}`)),
		testNode("c", "true", nil, nil, deleting, annotate(api.CleanupStatusAnnotation, `{"attempt":`)),
		testNode("d", "true", nil, nil, deleting, func(n *corev1.Node) { n.Finalizers = nil }),
	)
	code, out, _, _ := run(fapi, "", "cleanup", "status")
	want := []string{
		"NAME | DELETING | ATTEMPT | RETRY-IN | PLUGIN | STATE",
		"b | 4m | 3 | 4s | portworx | failed: HTTP 500",
		"b | 4m | 3 | 4s | volumeattachments | done",
		"c | 4m | - | - | - | unreadable: infra.894.io/cleanup-status: not JSON: unexpected end of JSON input",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != len(want) {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	for i := range want {
		if got := columns(lines[i]); got != want[i] {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}
	code, out, _, _ = run(fapi, "", "cleanup", "status", "-o", "json")
	var l List
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	if len(l.Items) != 2 || l.Items[0].Cleanup.Status == nil || l.Items[0].Cleanup.Status.Attempt != 3 || l.Items[0].Cleanup.Status.Plugins["portworx"] != "failed: HTTP 500" {
		t.Errorf("json items %+v: want b with its parsed status, and c", l.Items)
	}
	code, out, errOut, _ := run(newFake(testNode("a", "true", nil, nil)), "", "cleanup", "status", "-o", "json")
	if code != 0 || !strings.Contains(out, `"items": []`) || errOut != "" {
		t.Errorf("nothing in cleanup, json: exit %d, %q %q; want an empty list", code, out, errOut)
	}
}

func TestWhyCommand(t *testing.T) {
	event := func(ns, node, reason string) eventsv1.Event {
		return eventsv1.Event{Regarding: corev1.ObjectReference{Kind: "Node", Name: node}, Reason: reason, Type: "Normal",
			ReportingController: "kube-node-ready-agent"}
	}
	setup := func() *fakeAPI {
		fapi := newFake(testNode("a", "false", []corev1.Taint{unhealthyTaint}, condition(agentFailing())))
		fapi.events["default"] = []eventsv1.Event{event("default", "a", api.EventNodeRetainted), event("default", "b", api.EventNodeVerified)}
		fapi.events["other"] = []eventsv1.Event{event("other", "a", "Elsewhere")}
		return fapi
	}
	t.Run("all namespaces", func(t *testing.T) {
		code, out, _, _ := run(setup(), "", "why", "a")
		if code != 0 || !strings.Contains(out, api.EventNodeRetainted) || !strings.Contains(out, "Elsewhere") || strings.Contains(out, api.EventNodeVerified) ||
			!strings.Contains(out, "all namespaces") || !strings.Contains(out, "Outcome:") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})
	t.Run("--namespace", func(t *testing.T) {
		fapi := setup()
		code, out, _, _ := run(fapi, "", "why", "a", "-n", "other")
		if code != 0 || strings.Contains(out, api.EventNodeRetainted) || !strings.Contains(out, "Elsewhere") || strings.Join(fapi.listed, ",") != "other" {
			t.Errorf("exit %d, listed in %v, output:\n%s", code, fapi.listed, out)
		}
	})
	t.Run("all namespaces forbidden: default", func(t *testing.T) {
		fapi := setup()
		fapi.forbid["list events *"] = true
		code, out, _, _ := run(fapi, "", "why", "a")
		if code != 0 || !strings.Contains(out, api.EventNodeRetainted) || !strings.Contains(out, "namespace default (listing all namespaces is not allowed)") {
			t.Errorf("exit %d, output:\n%s", code, out)
		}
	})
	t.Run("events forbidden: the rest shown, a warning", func(t *testing.T) {
		fapi := setup()
		fapi.forbid["list events *"], fapi.forbid["list events default"] = true, true
		code, out, errOut, _ := run(fapi, "", "why", "a")
		if code != 0 || !strings.Contains(out, "ChecksFailing") || !strings.Contains(out, "cannot list them: not allowed to list events.events.k8s.io") ||
			!strings.Contains(errOut, "warning: Events not shown") {
			t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
		}
	})
	t.Run("not found", func(t *testing.T) {
		code, _, errOut, _ := run(setup(), "", "why", "nope")
		if code != ExitError || errOut != "error: node nope not found\n" {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

func TestBypassRoundTrip(t *testing.T) {
	fapi := newFake(testNode("a", "", []corev1.Taint{startupTaint}, nil, annotate("example.com/keep", "1")))
	uid := string(fapi.nodes["a"].UID)
	steps := []struct {
		args      []string
		wantOut   string
		wantValue string // the annotation afterwards, "" for absent
		wantPatch bool
	}{
		{[]string{"bypass", "a"}, "node/a bypassed: node-ready/skip-verification=true", "true", true},
		{[]string{"bypass", "a"}, "node/a already bypassed", "true", false},
		{[]string{"unbypass", "a"}, "node/a unbypassed", "", true},
		{[]string{"unbypass", "a"}, "node/a is not bypassed", "", false},
	}
	for _, st := range steps {
		before := len(fapi.patches)
		code, out, errOut, _ := run(fapi, "", st.args...)
		if code != 0 || !strings.Contains(out, st.wantOut) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", st.args, code, out, errOut, st.wantOut)
		}
		n := fapi.nodes["a"]
		if got := n.Annotations[api.SkipVerificationAnnotation]; got != st.wantValue {
			t.Errorf("%v: annotation %q, want %q", st.args, got, st.wantValue)
		}
		if n.Annotations["example.com/keep"] != "1" || len(n.Spec.Taints) != 1 {
			t.Errorf("%v: touched more than the annotation: %v %v", st.args, n.Annotations, n.Spec.Taints)
		}
		if patched := len(fapi.patches) > before; patched != st.wantPatch {
			t.Errorf("%v: patched %t, want %t", st.args, patched, st.wantPatch)
		}
	}
	if len(fapi.patches) > 0 {
		want := `{"metadata":{"annotations":{"node-ready/skip-verification":"true"},"uid":"` + uid + `"}}`
		if fapi.patches[0] != want {
			t.Errorf("patch %s, want %s", fapi.patches[0], want)
		}
	}
	fapi.forbid["patch nodes"] = true
	code, _, errOut, _ := run(fapi, "", "bypass", "a")
	if code != ExitError || !strings.Contains(errOut, "error: not allowed to patch nodes a: ") {
		t.Errorf("forbidden: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut, _ = run(fapi, "", "unbypass", "gone")
	if code != ExitError || errOut != "error: node gone not found\n" {
		t.Errorf("not found: exit %d, stderr %q", code, errOut)
	}
}

func TestCleanupSkip(t *testing.T) {
	tests := []struct {
		name        string
		node        corev1.Node
		args        []string
		stdin       string
		wantCode    int
		wantSkip    bool
		wantPrompt  string
		wantMessage string
	}{
		{name: "no: untouched", node: testNode("a", "true", nil, nil, deleting), stdin: "n\n",
			wantCode: ExitError, wantPrompt: "Node a: cleanup deleting: not started.", wantMessage: "cleanup skip cancelled: node a unchanged"},
		{name: "anything but yes is no", node: testNode("a", "true", nil, nil, deleting), stdin: "sure\n",
			wantCode: ExitError, wantPrompt: "[y/N]", wantMessage: "cancelled"},
		{name: "no answer (empty stdin) is no", node: testNode("a", "true", nil, nil, deleting), stdin: "",
			wantCode: ExitError, wantPrompt: "[y/N]", wantMessage: "cancelled"},
		{name: "y", node: testNode("a", "true", nil, nil, deleting), stdin: "y\n", wantSkip: true,
			wantPrompt: "Skip cleanup of node a? [y/N]", wantMessage: "node/a annotated infra.894.io/skip-cleanup=true"},
		{name: "YES without a newline", node: testNode("a", "true", nil, nil, deleting), stdin: " YES", wantSkip: true, wantPrompt: "[y/N]"},
		{name: "--yes asks nothing", node: testNode("a", "true", nil, nil, deleting), args: []string{"--yes"}, stdin: "n\n", wantSkip: true,
			wantMessage: "node/a annotated"},
		{name: "not deleting: said so", node: testNode("a", "true", nil, nil), stdin: "y\n", wantSkip: true,
			wantPrompt: "The node is not being deleted"},
		{name: "already set", node: testNode("a", "true", nil, nil, deleting, annotate(api.SkipCleanupAnnotation, "true")), stdin: "",
			wantSkip: true, wantMessage: "already has infra.894.io/skip-cleanup=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fapi := newFake(tt.node)
			code, out, errOut, _ := run(fapi, tt.stdin, append([]string{"cleanup", "skip", "a"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if got := fapi.nodes["a"].Annotations[api.SkipCleanupAnnotation] == "true"; got != tt.wantSkip {
				t.Errorf("skip annotation set: %t, want %t", got, tt.wantSkip)
			}
			if tt.wantPrompt != "" && !strings.Contains(errOut, tt.wantPrompt) {
				t.Errorf("stderr %q, want the prompt %q", errOut, tt.wantPrompt)
			}
			if tt.wantPrompt == "" && strings.Contains(errOut, "[y/N]") {
				t.Errorf("stderr %q: asked although it should not", errOut)
			}
			if !strings.Contains(out+errOut, tt.wantMessage) {
				t.Errorf("output %q %q, want %q", out, errOut, tt.wantMessage)
			}
			if !tt.wantSkip && len(fapi.patches) != 0 {
				t.Errorf("patched %v although declined", fapi.patches)
			}
		})
	}
}

// recreating is stdin that answers yes after the node was deleted and
// re-created under the same name while the question was on screen.
type recreating struct {
	fapi *fakeAPI
	done bool
}

func (r *recreating) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	r.done = true
	r.fapi.nodes["a"] = new(testNode("a", "true", nil, nil, deleting))
	return copy(p, "y\n"), nil
}

// The skip annotation is for the node the person was shown: a node
// re-created under the same name (a new UID) while they answered is left
// untouched.
func TestCleanupSkipLeavesANodeRecreatedMeanwhile(t *testing.T) {
	fapi := newFake(testNode("a", "true", nil, nil, deleting))
	shown := fapi.nodes["a"].UID
	var out, errOut bytes.Buffer
	code := Run(context.Background(), []string{"cleanup", "skip", "a"}, Env{
		Stdin: &recreating{fapi: fapi}, Stdout: &out, Stderr: &errOut,
		Connect: func(*Connection) (API, string, bool, error) { return fapi, "default", false, nil },
		Now:     func() time.Time { return now },
	})
	n := fapi.nodes["a"]
	if n.UID == shown {
		t.Fatal("the fixture gave the re-created node the UID of the one it replaced")
	}
	if code != ExitError || n.Annotations[api.SkipCleanupAnnotation] != "" || len(fapi.patches) != 0 {
		t.Errorf("exit %d, annotation %q, patches %v; want exit 1 and the new node untouched (stderr %q)",
			code, n.Annotations[api.SkipCleanupAnnotation], fapi.patches, errOut.String())
	}
}
