package nodecleanup

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

const fin = "infra.894.io/node-cleanup"

func TestNeedsFinalizer(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name string
		meta metav1.ObjectMeta
		want bool
	}{
		{"no finalizers", metav1.ObjectMeta{}, true},
		{"other finalizers", metav1.ObjectMeta{Finalizers: []string{"x/y"}}, true},
		{"has ours", metav1.ObjectMeta{Finalizers: []string{"x/y", fin}}, false},
		{"being deleted", metav1.ObjectMeta{DeletionTimestamp: &now}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsFinalizer(&metav1.PartialObjectMetadata{ObjectMeta: tt.meta}, fin); got != tt.want {
				t.Errorf("NeedsFinalizer = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAddFinalizerPatch(t *testing.T) {
	tests := []struct {
		name    string
		seen    []string // finalizers the cache saw
		stored  []string // finalizers the server holds when the patch lands
		want    []string
		wantErr bool
	}{
		{"absent list", nil, nil, []string{fin}, false},
		{"other finalizers kept", []string{"a/b"}, []string{"a/b"}, []string{"a/b", fin}, false},
		{"someone added a finalizer meanwhile", nil, []string{"a/b"}, nil, true},
		{"someone changed the list meanwhile", []string{"a/b"}, []string{"a/b", "c/d"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := AddFinalizerPatch(tt.seen, fin)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := applyPatch(t, raw, metav1.ObjectMeta{Name: "n", Finalizers: tt.stored}, tt.wantErr)
			if ok && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("finalizers = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRemoveFinalizerPatch(t *testing.T) {
	tests := []struct {
		name    string
		seen    []string // finalizers the cache saw
		stored  []string // finalizers the server holds when the patch lands
		uid     string   // UID the server holds
		want    []string
		wantErr bool
	}{
		{"only ours", []string{fin}, []string{fin}, "u1", []string{}, false},
		{"others kept", []string{"a/b", fin, "c/d"}, []string{"a/b", fin, "c/d"}, "u1", []string{"a/b", "c/d"}, false},
		{"list shifted meanwhile", []string{"a/b", fin}, []string{fin}, "u1", nil, true},
		{"re-created node (other UID)", []string{fin}, []string{fin}, "u2", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := RemoveFinalizerPatch("u1", tt.seen, fin)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := applyPatch(t, raw, metav1.ObjectMeta{Name: "n", UID: types.UID(tt.uid), Finalizers: tt.stored}, tt.wantErr)
			if ok && (len(got) != len(tt.want) || (len(tt.want) > 0 && !reflect.DeepEqual(got, tt.want))) {
				t.Errorf("finalizers = %v, want %v", got, tt.want)
			}
		})
	}
	if raw, _ := RemoveFinalizerPatch("u1", []string{"a/b"}, fin); raw != nil {
		t.Errorf("patch %s for a node without our finalizer, want none", raw)
	}
}

// applyPatch applies a JSON patch to a Node holding stored the way the API
// server would, and returns the resulting finalizers; ok is false when the
// patch was (as wantErr expects) refused.
func applyPatch(t *testing.T, raw []byte, stored metav1.ObjectMeta, wantErr bool) (finalizers []string, ok bool) {
	t.Helper()
	doc, _ := json.Marshal(metav1.PartialObjectMetadata{ObjectMeta: stored})
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if (err != nil) != wantErr {
		t.Fatalf("apply %s to %s: err = %v, wantErr %v", raw, doc, err, wantErr)
	}
	if err != nil {
		return nil, false
	}
	var got metav1.PartialObjectMetadata
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return got.Finalizers, true
}

func TestRetryDelayCapsAtMax(t *testing.T) {
	c := &Controller{cfg: Config{RetryBase: 5 * time.Second, RetryMax: 5 * time.Minute}}
	tests := []struct {
		requeues int
		want     time.Duration
	}{{0, 5 * time.Second}, {1, 10 * time.Second}, {5, 160 * time.Second}, {6, 5 * time.Minute}, {60, 5 * time.Minute}}
	for _, tt := range tests {
		if got := c.retryDelay(tt.requeues); got != tt.want {
			t.Errorf("retryDelay(%d) = %s, want %s", tt.requeues, got, tt.want)
		}
	}
}

func TestCleanupDeadline(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	deleted := metav1.NewTime(clk.Now().Add(-time.Minute))
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &deleted}}
	tests := []struct {
		name     string
		deadline time.Duration
		past     bool
	}{
		{name: "off", deadline: 0},
		{name: "not yet", deadline: time.Hour},
		{name: "passed", deadline: 30 * time.Second, past: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Controller{cfg: Config{Deadline: tt.deadline}, clock: clocktesting.NewFakeClock(clk.Now())}
			if got := c.pastDeadline(m); got != tt.past {
				t.Errorf("pastDeadline = %v, want %v", got, tt.past)
			}
		})
	}
	c := &Controller{cfg: Config{Deadline: 90 * time.Second}, clock: clocktesting.NewFakeClock(clk.Now())}
	if left := c.deadlineLeft(m); left != 30*time.Second {
		t.Errorf("deadlineLeft = %s, want 30s", left)
	}
}

func TestCleanupNews(t *testing.T) {
	deleted := metav1.NewTime(time.Now())
	meta := func(rv, uid string, deleting bool) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: rv, UID: types.UID(uid)}}
		if deleting {
			m.DeletionTimestamp = &deleted
		}
		return m
	}
	tests := []struct {
		name     string
		old, new *metav1.PartialObjectMetadata
		want     bool
	}{
		{name: "deletion starts", old: meta("1", "a", false), new: meta("2", "a", true), want: true},
		{name: "another update of a node being deleted waits for the backoff", old: meta("2", "a", true), new: meta("3", "a", true)},
		{name: "re-created under the same name", old: meta("2", "a", true), new: meta("3", "b", true), want: true},
		{name: "periodic resync", old: meta("2", "a", true), new: meta("2", "a", true), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := cleanupNews(tt.old, tt.new); got != tt.want {
				t.Errorf("cleanupNews = %v, want %v", got, tt.want)
			}
		})
	}
}
