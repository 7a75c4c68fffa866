package plugins

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// receiver is a hook endpoint that answers the statuses it is given, in turn.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	bodies   []HookDocument
	auth     []string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d HookDocument
	b, _ := io.ReadAll(req.Body)
	if json.Unmarshal(b, &d) != nil || req.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.bodies = append(r.bodies, d)
	r.auth = append(r.auth, req.Header.Get("X-Api-Key"))
	status := http.StatusOK
	if len(r.statuses) > 0 {
		status, r.statuses = r.statuses[0], r.statuses[1:]
	}
	w.WriteHeader(status)
}

func deletedNode() *corev1.Node {
	n := node("n1")
	n.Spec.ProviderID = "aws:///eu-west-1a/i-0abc"
	n.Labels[corev1.LabelTopologyZone] = "eu-west-1a"
	n.Labels[corev1.LabelInstanceTypeStable] = "m7g.large"
	now := metav1.NewTime(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	n.DeletionTimestamp = &now
	return n
}

func TestHook(t *testing.T) {
	tests := []struct {
		name      string
		statuses  []int
		accept    string
		wantErr   string
		wantPosts int
	}{
		{name: "delivered", wantPosts: 1},
		{name: "retried until accepted", statuses: []int{500, 503}, wantPosts: 3},
		{name: "a 4xx is final", statuses: []int{400}, wantErr: "refused it: HTTP 400", wantPosts: 1},
		{name: "retries run out", statuses: []int{500, 500, 500}, wantErr: "HTTP 500", wantPosts: 3},
		{name: "only the accepted codes count", statuses: []int{200}, accept: `,"acceptStatus":[202]`, wantErr: "HTTP 200", wantPosts: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &receiver{statuses: tt.statuses}
			if tt.accept != "" {
				r.statuses = []int{200, 200, 200}
			}
			ts := httptest.NewServer(r)
			defer ts.Close()
			p, err := build(t, newHook, `{"url":"`+ts.URL+`/nodes?token=s3cret","authHeader":"X-Api-Key","authHeaderFile":"`+secretFile(t, "k-123")+`","cluster":"prod","retries":2`+tt.accept+`}`)
			if err != nil {
				t.Fatal(err)
			}
			ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{Attempt: 1})
			deleted := deletedNode()
			err = p.Cleanup(ctx, deleted)
			if (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q carries the URL's query", err)
			}
			if len(r.bodies) != tt.wantPosts {
				t.Fatalf("%d posts, want %d", len(r.bodies), tt.wantPosts)
			}
			d := r.bodies[0]
			want := HookNode{Name: "n1", UID: string(deleted.UID), ProviderID: "aws:///eu-west-1a/i-0abc", Zone: "eu-west-1a", InstanceType: "m7g.large"}
			if d.Event != "NodeDeleted" || d.Cluster != "prod" || d.Node.Name != want.Name || d.Node.UID != want.UID ||
				d.Node.ProviderID != want.ProviderID || d.Node.Zone != want.Zone || d.Node.InstanceType != want.InstanceType ||
				d.Node.DeletionTimestamp == nil || d.Node.Labels[corev1.LabelHostname] != "n1" {
				t.Errorf("document = %+v", d)
			}
			if r.auth[0] != "k-123" {
				t.Errorf("X-Api-Key = %q, want the secret file's value", r.auth[0])
			}
		})
	}
}

func TestHookDryRunPostsNothing(t *testing.T) {
	r := &receiver{}
	ts := httptest.NewServer(r)
	defer ts.Close()
	p, err := build(t, newHook, `{"url":"`+ts.URL+`"}`)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cleanup.WithRunInfo(context.Background(), cleanup.RunInfo{DryRun: true, Attempt: 1})
	if err := p.Cleanup(ctx, deletedNode()); err != nil || len(r.bodies) != 0 {
		t.Errorf("dry run: err=%v, %d posts, want none", err, len(r.bodies))
	}
}

func TestHookSettingsNameTheKey(t *testing.T) {
	for _, tt := range []struct{ settings, want string }{
		{`{}`, "hook.url: required"},
		{`{"url":"ftp://x/y"}`, "hook.url"},
		{`{"url":"http://[::1"}`, "hook.url"},
		{`{"url":"http://x","authHeaderFile":"/does/not/exist"}`, "hook.authHeaderFile"},
		{`{"url":"http://x","acceptStatus":[42]}`, "hook.acceptStatus[0]"},
		{`{"url":"http://x","retries":11}`, "hook.retries"},
		{`{"url":"http://x","method":"PUT"}`, "hook.method: unknown key"},
	} {
		if _, err := build(t, newHook, tt.settings); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %s", tt.settings, err, tt.want)
		}
	}
}
