package suspend

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

const ns = "kube-node-ready"

// waitState polls s until want says yes (the watch delivers asynchronously).
func waitState(t *testing.T, s *Switch, what string, want func(State) bool) State {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.State()
		if want(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %+v", what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSwitchFollowsTheConfigMap: the watch turns the switch on when the
// ConfigMap appears (with its reason) and off when it goes, and sets the
// gauge; another ConfigMap in the namespace is not the switch.
func TestSwitchFollowsTheConfigMap(t *testing.T) {
	client := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}})
	gauge := NewGauge()
	s := New(client, ns, api.SuspendConfigMap, gauge, nil)
	go s.Run(t.Context())
	waitState(t, s, "off after the first list", func(st State) bool { return st.Known && !st.On })
	if s.State().Holds() {
		t.Fatal("an absent switch holds")
	}
	cm := ConfigMap(ns, api.SuspendConfigMap, "dns incident", "oncall", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if _, err := client.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitState(t, s, "on once created", func(st State) bool { return st.On })
	if st.Reason != "dns incident" || st.By != "oncall" || st.Since != "2026-01-02T03:04:05Z" || !st.Holds() {
		t.Errorf("state %+v, want the ConfigMap's reason, by and since", st)
	}
	if got := testutil.ToFloat64(gauge); got != 1 {
		t.Errorf("node_ready_suspended = %v while on, want 1", got)
	}
	if why := st.Why(); !strings.Contains(why, "dns incident") || !strings.Contains(why, "oncall") {
		t.Errorf("Why() = %q, want the reason and who", why)
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(t.Context(), api.SuspendConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, "off once deleted", func(st State) bool { return st.Known && !st.On })
	if got := testutil.ToFloat64(gauge); got != 0 {
		t.Errorf("node_ready_suspended = %v after resume, want 0", got)
	}
}

// TestUnreadableSwitchHolds: before the first read, and while the switch
// cannot be listed (forbidden, the API server away), it holds; a fresh
// read that fails holds too.
func TestUnreadableSwitchHolds(t *testing.T) {
	if !(State{}).Holds() {
		t.Error("a switch not read yet does not hold")
	}
	client := fake.NewClientset()
	client.PrependReactor("list", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("configmaps is forbidden")
	})
	client.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("configmaps is forbidden")
	})
	s := New(client, ns, api.SuspendConfigMap, nil, nil)
	go s.Run(t.Context())
	st := waitState(t, s, "unreadable", func(st State) bool { return st.Err != nil })
	if !st.Holds() || !strings.Contains(st.Why(), "cannot be read") {
		t.Errorf("unreadable state %+v (%q) does not hold", st, st.Why())
	}
	fresh, err := s.Read(t.Context())
	if err == nil || !fresh.Holds() {
		t.Errorf("fresh read of a forbidden switch: %+v, %v; want an error that holds", fresh, err)
	}
}

// TestReadIsFresh: Read asks the API server, so a switch written after the
// watch's last event is seen.
func TestReadIsFresh(t *testing.T) {
	client := fake.NewClientset(ConfigMap(ns, api.SuspendConfigMap, "why", "", time.Now()))
	s := New(client, ns, api.SuspendConfigMap, nil, nil) // never run: the watch saw nothing
	st, err := s.Read(t.Context())
	if err != nil || !st.On || st.Reason != "why" {
		t.Errorf("Read = %+v, %v; want on with its reason", st, err)
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(t.Context(), api.SuspendConfigMap, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Read(t.Context()); err != nil || st.Holds() {
		t.Errorf("Read after delete = %+v, %v; want off", st, err)
	}
}
