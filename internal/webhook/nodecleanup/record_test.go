package nodecleanup

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// TestRecordFinalizer: the webhook records its finalizer before adding it
// anywhere; a custom name it used before and may no longer remove stops its
// start while a node carries it (naming the node and the way out), and is
// dropped once none does; the chart's key is never touched.
func TestRecordFinalizer(t *testing.T) {
	const (
		ns, name = "knr", "knr-webhook-finalizers"
		c1, c2   = "example.com/one", "example.com/two"
	)
	honoured := []string{fin} // a shipped name, honoured by the webhook
	for _, tt := range []struct {
		name      string
		data      map[string]string // nil: no record
		nodes     []*metav1.PartialObjectMetadata
		current   string
		wantUsed  string
		wantError string
	}{
		{name: "first start records the name", data: map[string]string{RecordChartKey: c1}, current: c1, wantUsed: c1},
		{name: "already recorded: no write", data: map[string]string{RecordUsedKey: c1}, current: c1, wantUsed: c1},
		{name: "a shipped name used before stays", data: map[string]string{RecordUsedKey: fin}, current: c1, wantUsed: fin + "," + c1},
		{name: "renamed away from a custom name no node carries", data: map[string]string{RecordUsedKey: c1}, current: c2,
			nodes: []*metav1.PartialObjectMetadata{meta("n0", finalizers("a/b"))}, wantUsed: c2},
		{name: "renamed away from a custom name nodes carry", data: map[string]string{RecordUsedKey: c1}, current: c2,
			nodes: []*metav1.PartialObjectMetadata{meta("n0", finalizers("a/b", c1)), meta("n1")}, wantUsed: c1, wantError: "finalizer " + c1 + ", which this release's webhook added before (configmap knr/knr-webhook-finalizers), is on 1 nodes (n0)"},
		{name: "no record", current: c1, wantError: ErrNoRecord.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.data != nil {
				objs = append(objs, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: tt.data})
			}
			client := fake.NewClientset(objs...)
			scheme := runtime.NewScheme()
			metav1.AddMetaToScheme(scheme)
			var nodes []runtime.Object
			for _, n := range tt.nodes {
				nodes = append(nodes, n)
			}
			err := RecordFinalizer(t.Context(), client.CoreV1().ConfigMaps(ns), metadatafake.NewSimpleMetadataClient(scheme, nodes...), name, tt.current, honoured)
			switch {
			case tt.wantError == "" && err != nil:
				t.Fatalf("RecordFinalizer: %v", err)
			case tt.wantError != "" && (err == nil || !strings.Contains(err.Error(), tt.wantError)):
				t.Fatalf("RecordFinalizer: %v, want an error saying %q", err, tt.wantError)
			}
			if tt.data == nil {
				return
			}
			var stranded *StrandedError
			if errors.As(err, &stranded) && !strings.Contains(err.Error(), "set webhook.finalizer back to "+c1) {
				t.Errorf("the error does not say the way out: %v", err)
			}
			cm, _ := client.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{})
			if got := cm.Data[RecordUsedKey]; got != tt.wantUsed {
				t.Errorf("used = %q, want %q", got, tt.wantUsed)
			}
			if got := cm.Data[RecordChartKey]; got != tt.data[RecordChartKey] {
				t.Errorf("the chart's key changed to %q", got)
			}
		})
	}
}
