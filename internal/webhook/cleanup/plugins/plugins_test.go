package plugins

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

var quiet = slog.New(slog.DiscardHandler)

// node is a Node named name with a UID of its own, as the API server gives
// each object it creates: two calls with one name are two incarnations of
// the node (deleted and re-created), never the same object.
func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uuid.NewUUID(), Labels: map[string]string{corev1.LabelHostname: name}}}
}

func hostnameTerm(values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: values}}}
}

func TestPinnedOnlyTo(t *testing.T) {
	pv := func(terms ...corev1.NodeSelectorTerm) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
	}
	zone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	byField := corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}}}
	tests := []struct {
		name string
		pv   *corev1.PersistentVolume
		want bool
	}{
		{"hostname of this node", pv(hostnameTerm("n1")), true},
		{"metadata.name field", pv(byField), true},
		{"another node", pv(hostnameTerm("n2")), false},
		{"this node or another", pv(hostnameTerm("n1", "n2")), false},
		{"second term admits a zone", pv(hostnameTerm("n1"), zone), false},
		{"zone only", pv(zone), false},
		{"no affinity", &corev1.PersistentVolume{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PinnedOnlyTo(tt.pv, node("n1")); got != tt.want {
				t.Errorf("PinnedOnlyTo = %v, want %v", got, tt.want)
			}
		})
	}
}

// secretsDir stands for the mounted Secret the plugins read their secret
// files from (--secrets-dir).
var secretsDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plugins-secrets-")
	if err != nil {
		panic(err)
	}
	secretsDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// secretFile writes content to a new file in secretsDir.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	f, err := os.CreateTemp(secretsDir, "secret-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content + "\n"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	return f.Name()
}

// testDeps are the plugins' dependencies in tests: an API server that holds
// no Node (the deleted one is gone), secret files in secretsDir.
func testDeps(c *http.Client) cleanup.Deps {
	return cleanup.Deps{HTTP: c, Client: fake.NewClientset(), Log: quiet, SecretsDir: secretsDir}
}

func build(t *testing.T, b func(cleanup.Deps, json.RawMessage) (cleanup.Plugin, error), settings string) (cleanup.Plugin, error) {
	t.Helper()
	return b(testDeps(http.DefaultClient), json.RawMessage(settings))
}

func TestSettingsErrorsNameTheKey(t *testing.T) {
	tok := secretFile(t, "t")
	tests := []struct {
		name     string
		new      func(cleanup.Deps, json.RawMessage) (cleanup.Plugin, error)
		settings string
		want     string
	}{
		{"portworx endpoint missing", newPortworx, `{}`, "portworx.endpoint"},
		{"portworx endpoint not a URL", newPortworx, `{"endpoint":"portworx:9001"}`, "portworx.endpoint"},
		{"portworx token file missing", newPortworx, `{"endpoint":"http://px:9001","tokenFile":"/nonexistent"}`, "portworx.tokenFile"},
		{"notify url file required", newNotify, `{}`, "notify.urlFile"},
		{"notify format", newNotify, `{"urlFile":"` + tok + `","format":"irc"}`, "notify.format"},
		{"notify events", newNotify, `{"urlFile":"` + tok + `","events":["begin"]}`, "notify.events[0]"},
		{"notify retries", newNotify, `{"urlFile":"` + tok + `","retries":99}`, "notify.retries"},
		{"notify unknown key", newNotify, `{"urlFile":"` + tok + `","url":"http://x"}`, "notify.url: unknown key"},
		{"volumeattachments poll", newVolumeAttachments, `{"pollInterval":"0s"}`, "volumeattachments.pollInterval"},
		{"local-volumes class", newLocalVolumes, `{"storageClasses":[""]}`, "local-volumes.storageClasses[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(t, tt.new, tt.settings)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// pxServer speaks the part of the OpenStorage cluster API the plugin uses.
type pxServer struct {
	enumerate  string
	deleteCode int
	mu         sync.Mutex
	deleted    []string
	auth       []string
}

func (s *pxServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/cluster/enumerate":
		io.WriteString(w, s.enumerate)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/cluster/"):
		s.mu.Lock()
		s.deleted = append(s.deleted, strings.TrimPrefix(r.URL.Path, "/v1/cluster/")+"?"+r.URL.RawQuery)
		s.mu.Unlock()
		w.WriteHeader(s.deleteCode)
	default:
		http.NotFound(w, r)
	}
}

func TestPortworx(t *testing.T) {
	tests := []struct {
		name        string
		enumerate   string
		deleteCode  int
		wantErr     string
		wantDeleted string
	}{
		{"decommissions by scheduler node name", `{"nodes":[{"id":"px-1","scheduler_node_name":"n1"},{"id":"px-2","scheduler_node_name":"n2"}]}`, 200, "", "px-1?forceRemove=false"},
		{"hostname when there is no scheduler name", `{"nodes":[{"id":"px-9","hostname":"n1"}]}`, 200, "", "px-9?forceRemove=false"},
		{"not in the cluster is success", `{"nodes":[{"id":"px-2","scheduler_node_name":"n2"}]}`, 200, "", ""},
		{"already removed (404) is success", `{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, 404, "", "px-1?forceRemove=false"},
		{"refused", `{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, 500, "HTTP 500", "px-1?forceRemove=false"},
		{"garbage answer", `<html>gateway</html>`, 200, "not the expected JSON", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &pxServer{enumerate: tt.enumerate, deleteCode: tt.deleteCode}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			p, err := build(t, newPortworx, `{"endpoint":"`+ts.URL+`","tokenFile":"`+secretFile(t, "s3cret")+`"}`)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Cleanup(context.Background(), node("n1"))
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if got := strings.Join(srv.deleted, ","); got != tt.wantDeleted {
				t.Errorf("deleted %q, want %q", got, tt.wantDeleted)
			}
			for _, a := range srv.auth {
				if a != "Bearer s3cret" {
					t.Errorf("Authorization = %q, want the token from the file", a)
				}
			}
		})
	}
}

// deleting is n marked for deletion a minute ago, as the cleanup sees it.
func deleting(n *corev1.Node) *corev1.Node {
	n.DeletionTimestamp = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	n.Finalizers = []string{"infra.894.io/node-cleanup"}
	return n
}

// The Portworx node decommissioned is the deleted Node's incarnation's,
// as the storage plugins' volumes are: a Node re-created under the same name
// (another UID, seen by a fresh GET after the enumerate) owns the Portworx
// node of that name now, and a Portworx node matched by hostname alone is
// left while another live Node carries that hostname. Both are a
// cleanup.Skip with the reason, not a failure.
func TestPortworxLeavesAnotherIncarnationsNodeAlone(t *testing.T) {
	withHostname := func(n *corev1.Node, h string) *corev1.Node {
		n.Labels[corev1.LabelHostname] = h
		return n
	}
	old := deleting(node("n1"))
	tests := []struct {
		name        string
		node        *corev1.Node
		cluster     []runtime.Object
		enumerate   string
		wantDeleted string
		wantSkip    string
	}{
		{"the Node being deleted: decommissioned", old, []runtime.Object{old},
			`{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, "px-1?forceRemove=false", ""},
		{"the Node already gone: decommissioned", old, nil,
			`{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, "px-1?forceRemove=false", ""},
		{"re-created under the same name: left alone", old, []runtime.Object{node("n1")},
			`{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, "", "re-created"},
		{"re-created, matched by hostname: left alone", old, []runtime.Object{node("n1")},
			`{"nodes":[{"id":"px-9","hostname":"n1"}]}`, "", "re-created"},
		{"hostname another live node carries: left alone", withHostname(deleting(node("n2")), "h2"),
			[]runtime.Object{withHostname(node("n2b"), "h2")},
			`{"nodes":[{"id":"px-9","Hostname":"h2"}]}`, "", "n2b"},
		{"hostname only a deleting node also carries: decommissioned", withHostname(deleting(node("n3")), "h3"),
			[]runtime.Object{withHostname(deleting(node("n3b")), "h3")},
			`{"nodes":[{"id":"px-9","hostname":"h3"}]}`, "px-9?forceRemove=false", ""},
		{"scheduler name wins over a shared hostname", withHostname(deleting(node("n4")), "h4"),
			[]runtime.Object{withHostname(node("n4b"), "h4")},
			`{"nodes":[{"id":"px-4","SchedulerNodeName":"n4","Hostname":"h4"}]}`, "px-4?forceRemove=false", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &pxServer{enumerate: tt.enumerate, deleteCode: 200}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			deps := testDeps(http.DefaultClient)
			deps.Client = fake.NewClientset(tt.cluster...)
			p, err := newPortworx(deps, json.RawMessage(`{"endpoint":"`+ts.URL+`"}`))
			if err != nil {
				t.Fatal(err)
			}
			err = p.Cleanup(context.Background(), tt.node)
			var skip *cleanup.Skip
			switch {
			case tt.wantSkip == "" && err != nil:
				t.Errorf("err = %v, want success", err)
			case tt.wantSkip != "" && (!errors.As(err, &skip) || !strings.Contains(skip.Reason, tt.wantSkip) || !strings.Contains(skip.Reason, "px-")):
				t.Errorf("err = %v, want a cleanup.Skip naming the portworx node and %q", err, tt.wantSkip)
			}
			if got := strings.Join(srv.deleted, ","); got != tt.wantDeleted {
				t.Errorf("deleted %q, want %q", got, tt.wantDeleted)
			}
		})
	}
}

func TestPortworxDryRunCallsNothing(t *testing.T) {
	srv := &pxServer{enumerate: `{"nodes":[{"id":"px-1","scheduler_node_name":"n1"}]}`, deleteCode: 200}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	p, err := build(t, newPortworx, `{"endpoint":"`+ts.URL+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{DryRun: true, Attempt: 1})
	if err := p.Cleanup(ctx, node("n1")); err != nil || len(srv.auth) != 0 {
		t.Errorf("dry run: err=%v, %d requests sent, want none", err, len(srv.auth))
	}
}

func TestNotifyFormatsAndRetries(t *testing.T) {
	for _, format := range []string{"slack", "teams"} {
		t.Run(format, func(t *testing.T) {
			var calls atomic.Int32
			var mu sync.Mutex
			var bodies []map[string]any
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.WriteHeader(http.StatusServiceUnavailable) // first try fails: retried
					return
				}
				var m map[string]any
				if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
					t.Errorf("body: %v", err)
				}
				mu.Lock()
				bodies = append(bodies, m)
				mu.Unlock()
			}))
			defer ts.Close()
			p, err := build(t, newNotify, `{"urlFile":"`+secretFile(t, ts.URL)+`","format":"`+format+`","cluster":"prod"}`)
			if err != nil {
				t.Fatal(err)
			}
			n1 := node("n1")
			ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 1})
			if err := p.Cleanup(ctx, n1); err != nil {
				t.Fatal(err)
			}
			// A second attempt (same node, same UID) does not announce the start again.
			ctx2 := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 2})
			if err := p.Cleanup(ctx2, n1); err != nil || len(bodies) != 1 {
				t.Errorf("attempt 2 sent a start message again")
			}
			p.(cleanup.Observer).Finished(ctx, n1, nil)
			if len(bodies) != 2 {
				t.Fatalf("%d messages delivered, want start and success", len(bodies))
			}
			text, _ := bodies[0]["text"].(string)
			if !strings.Contains(text, "n1") || !strings.Contains(text, "prod") || !strings.Contains(text, "started") {
				t.Errorf("start message text %q", text)
			}
			if format == "teams" && bodies[0]["@type"] != "MessageCard" {
				t.Errorf("teams message %v is not a MessageCard", bodies[0])
			}
		})
	}
}

// A critical notify plugin must hold the node until its start message is
// delivered: a receiver answering 500 fails every attempt, and the message
// is sent again on the next attempt until the receiver takes it.
func TestNotifyStartRetriedUntilDelivered(t *testing.T) {
	var healthy atomic.Bool
	var delivered atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		delivered.Add(1)
	}))
	defer ts.Close()
	p, err := build(t, newNotify, `{"urlFile":"`+secretFile(t, ts.URL)+`","retries":0,"events":["start"]}`)
	if err != nil {
		t.Fatal(err)
	}
	n := node("n1")
	for attempt := 1; attempt <= 3; attempt++ {
		ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: attempt})
		if err := p.Cleanup(ctx, n); err == nil {
			t.Fatalf("attempt %d succeeded while the receiver answers 500", attempt)
		}
	}
	healthy.Store(true)
	ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 4})
	if err := p.Cleanup(ctx, n); err != nil || delivered.Load() != 1 {
		t.Fatalf("attempt 4 with a healthy receiver: err=%v, delivered %d, want nil and 1", err, delivered.Load())
	}
	ctx = cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 5})
	if err := p.Cleanup(ctx, n); err != nil || delivered.Load() != 1 {
		t.Errorf("attempt 5 after delivery: err=%v, delivered %d, want the start message once", err, delivered.Load())
	}
	// A node re-created under the same name is a new node (a new UID).
	again := node("n1")
	if err := p.Cleanup(ctx, again); err != nil || delivered.Load() != 2 {
		t.Errorf("re-created node: err=%v, delivered %d, want a second start message", err, delivered.Load())
	}
}

// The URL is a secret: an unparsable one must not reach logs or Events
// through the plugin's error.
func TestNotifyBadURLErrorHidesTheURL(t *testing.T) {
	const secret = "T0KEN-s3cret"
	p, err := build(t, newNotify, `{"urlFile":"`+secretFile(t, "http://hooks.example/"+secret+"\x7f")+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 1})
	err = p.Cleanup(ctx, node("n1"))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("err = %v, want an error without the URL", err)
	}
}
