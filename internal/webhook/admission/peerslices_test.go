package admission

import (
	"fmt"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// sliceNames is a PeerSliceNames that holds names (nil: not listed yet).
type sliceNames []string

func (s sliceNames) Names() []string { return s }

func TestHintPeerSlices(t *testing.T) {
	var names sliceNames
	for i := range 30 {
		names = append(names, fmt.Sprintf("kube-node-ready-%05x", i*7919))
	}
	want := api.FormatPeerSlices("n", names)
	tests := []struct {
		name   string
		raw    string
		names  PeerSliceNames
		inject bool
		// hint is the annotation wanted; "" none.
		hint string
		// others are the annotations wanted beside it.
		others map[string]string
		// outcome is the one node_cleanup_webhook_peer_slices_hint_total
		// counts; added when hint is set.
		outcome string
	}{
		{name: "no annotations", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`, names: names, hint: want},
		{name: "annotations kept", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","annotations":{"a":"b"}}}`, names: names, hint: want, others: map[string]string{"a": "b"}},
		{name: "annotations null", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","annotations":null}}`, names: names, hint: want},
		{name: "a creator's hint replaced", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","annotations":{"` + api.PeerSlicesAnnotation + `":"x"}}}`, names: names, hint: want},
		{name: "finalizer present", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","finalizers":["` + fin + `"]}}`, names: names, hint: want},
		{name: "with the startup taint's mark", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"}}}`, names: names, inject: true, hint: want, others: map[string]string{api.StartupTaintAdmissionAnnotation: "added"}},
		{name: "with the mark, annotations there", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","labels":{"kubernetes.io/os":"linux"},"annotations":{"a":"b"}}}`, names: names, inject: true, hint: want, others: map[string]string{"a": "b", api.StartupTaintAdmissionAnnotation: "added"}},
		{name: "three slices: all of them", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`, names: names[:3], hint: api.FormatPeerSlices("n", names[:3])},
		{name: "not listed yet: none", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n"}}`, names: sliceNames(nil), outcome: HintNoNames},
		{name: "no name: none", raw: `{"apiVersion":"v1","kind":"Node","metadata":{"generateName":"n-"}}`, names: names, outcome: HintUnreadable},
		{name: "no metadata: none", raw: `{"apiVersion":"v1","kind":"Node"}`, names: names, outcome: HintUnreadable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := nodeCreate(t, &corev1.Node{})
			req.Object.Raw = []byte(tc.raw)
			h := &Handler{Finalizer: fin, PeerSlices: tc.names, Metrics: newMetrics(t, prometheus.NewRegistry())}
			if tc.inject {
				h.StartupTaint = injector()
			}
			n, _ := answerFor(t, h, req)
			got, ok := n.Annotations[api.PeerSlicesAnnotation]
			if got != tc.hint || ok != (tc.hint != "") {
				t.Errorf("hint %q (present %v), want %q", got, ok, tc.hint)
			}
			for k, v := range tc.others {
				if n.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, n.Annotations[k], v)
				}
			}
			if !slices.Equal(n.Finalizers, []string{fin}) {
				t.Errorf("finalizers = %v", n.Finalizers)
			}
			outcome := tc.outcome
			if tc.hint != "" {
				outcome = HintAdded
			}
			if got := counterValue(t, h.Metrics.hint.WithLabelValues(outcome)); got != 1 {
				t.Errorf("peer_slices_hint_total{outcome=%q} = %v, want 1", outcome, got)
			}
		})
	}
}

// TestHintIsTheAgentsRanking: the hint lists the first names of the
// ranking the node's agent makes from every name.
func TestHintIsTheAgentsRanking(t *testing.T) {
	var names sliceNames
	for i := range 12 {
		names = append(names, fmt.Sprintf("s-%d", i))
	}
	for _, node := range []string{"a", "b", "c"} {
		req := nodeCreate(t, &corev1.Node{})
		req.Object.Raw = []byte(`{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + node + `"}}`)
		n, _ := answerFor(t, &Handler{Finalizer: fin, PeerSlices: names}, req)
		got, _ := api.ParsePeerSlices(n.Annotations[api.PeerSlicesAnnotation])
		if want := api.RankPeerSlices(node, names)[:api.PeerSlicesHintLen]; !slices.Equal(got, want) {
			t.Errorf("%s: hint %v, want %v", node, got, want)
		}
	}
}
