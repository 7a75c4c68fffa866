package app

import (
	"slices"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/nodecleanup"
)

// TestReleaseFinalizers: remove-finalizers takes off the names of its own
// release only. Without a record it removes what it is given and every
// shipped name; with one, the record's names too; and when neither the
// record nor the release's leader Lease exists (an agent-only release,
// whose values still name the default finalizer another release's webhook
// uses) it removes nothing.
func TestReleaseFinalizers(t *testing.T) {
	const (
		ns     = "knr"
		record = "knr-webhook-finalizers"
		lease  = "knr-webhook"
		custom = "example.com/custom-cleanup"
		older  = "example.com/older-cleanup"
	)
	recordOf := func(names string) runtime.Object {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record, Namespace: ns}, Data: map[string]string{nodecleanup.RecordChartKey: names}}
	}
	leaseObj := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease, Namespace: ns}}
	for _, tt := range []struct {
		name    string
		record  string // --finalizer-record
		final   string
		objects []runtime.Object
		want    []string
	}{
		{"no record flag: the names given and the shipped ones", "", custom, nil, []string{custom, api.Finalizer}},
		{"agent-only release: nothing", record, api.Finalizer, nil, nil},
		{"a webhook older than the record ran: its Lease", record, api.Finalizer, []runtime.Object{leaseObj}, []string{api.Finalizer}},
		{"the record's names", record, custom, []runtime.Object{recordOf(older + ", " + custom + ",not a name,")}, []string{custom, api.Finalizer, older}},
		{"the names the webhook recorded itself", record, custom, []runtime.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: record, Namespace: ns},
			Data: map[string]string{nodecleanup.RecordChartKey: custom, nodecleanup.RecordUsedKey: older + "," + custom}}}, []string{custom, api.Finalizer, older}},
		{"an empty record still says the webhook ran", record, api.Finalizer, []runtime.Object{recordOf("")}, []string{api.Finalizer}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := NewOptions()
			opts.Namespace, opts.FinalizerRecord, opts.LeaseName, opts.Finalizer = ns, tt.record, lease, tt.final
			got, err := releaseFinalizers(t.Context(), fake.NewClientset(tt.objects...), *opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("releaseFinalizers = %q, want %q", got, tt.want)
			}
		})
	}
}
