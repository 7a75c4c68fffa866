package remediate

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The delete is decided on what the API server says right before it, not
// on the cache the plan was made from: a node the cache still shows overdue
// but that verified, or was protected, since is left alone; one unchanged
// is replaced (the positive control).
func TestReplaceJudgesTheFreshRead(t *testing.T) {
	cases := []struct {
		name        string
		api         *corev1.Node
		wantDeleted bool
	}{
		{"unchanged: replaced", node("n", time.Hour, taint(startup)), true},
		{"verified since the cache was filled", node("n", time.Hour, label("node-ready/verified", "true")), false},
		{"protected since the cache was filled", node("n", time.Hour, taint(startup), annotation("infra.894.io/protect", "true")), false},
		{"re-created under the same name", func() *corev1.Node { n := node("n", 0, taint(startup)); n.UID = "uid-new"; return n }(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.api)
			ref := testController(t, PolicyReplace, "1", "10%", false)
			c, err := New(client, nil, ref.cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			c.now = ref.now
			c.probe = func(context.Context) error { return nil }
			c.obs, c.brk = newObserver(c, t0.Add(-1000*time.Hour)), &breaker{}
			c.obs.contact = t0 // the API server answered the last scan
			cached := node("n", time.Hour, taint(startup))
			c.scan(t.Context(), watched(c, cached))

			_, err = client.CoreV1().Nodes().Get(t.Context(), "n", metav1.GetOptions{})
			if deleted := apierrors.IsNotFound(err); deleted != tc.wantDeleted {
				t.Fatalf("deleted %v (%v), want %v", deleted, err, tc.wantDeleted)
			}
		})
	}
}
