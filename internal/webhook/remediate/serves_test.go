package remediate

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"
)

// pod is a pod on node, owned by a controller of kind (none when "").
func pod(name, node, kind string, edit ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uuid.NewUUID()}, Spec: corev1.PodSpec{NodeName: node}}
	if kind != "" {
		apiVersion := "apps/v1"
		if kind == "Job" {
			apiVersion = "batch/v1"
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name + "-owner", UID: uuid.NewUUID(), Controller: ptr.To(true)}}
	}
	for _, e := range edit {
		e(p)
	}
	return p
}

// Remediation never removes capacity that serves: on the fresh read, a
// never-verified node is deleted only while every pod on it is a DaemonSet
// or mirror pod (or has finished); a node that verified once goes only
// through its NodeClaim, and only with the opt-in.
func TestCapacityThatServesIsNeverRemoved(t *testing.T) {
	mirror := func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }
	done := func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }
	retainted := []nodeOpt{taint(unhealthy), label("node-ready/verified", "false")}
	cases := []struct {
		name        string
		node        *corev1.Node
		pods        []*corev1.Pod
		claim       bool
		optIn       bool
		wantDeleted string // "node", "nodeclaim" or ""
		wantReason  string
	}{
		{"never verified, DaemonSet, mirror and finished pods only: deleted", node("n", time.Hour, taint(startup)),
			[]*corev1.Pod{pod("ds", "n", "DaemonSet"), pod("static", "n", "", mirror), pod("job", "n", "Job", done)}, false, false, "node", ""},
		{"never verified, a bare pod: held", node("n", time.Hour, taint(startup)),
			[]*corev1.Pod{pod("ds", "n", "DaemonSet"), pod("bare", "n", "")}, false, false, "", blockedWorkloads},
		{"never verified, a ReplicaSet's pod, even with a NodeClaim: held", node("n", time.Hour, taint(startup)),
			[]*corev1.Pod{pod("web", "n", "ReplicaSet")}, true, false, "", blockedWorkloads},
		{"in service: reported", node("n", time.Hour, retainted...), nil, true, false, "", blockedInService},
		{"in service, opt-in, no NodeClaim: never a bare delete", node("n", time.Hour, retainted...),
			[]*corev1.Pod{pod("web", "n", "ReplicaSet")}, false, true, "", blockedNoDrain},
		{"in service, opt-in, a NodeClaim: Karpenter drains it", node("n", time.Hour, retainted...),
			[]*corev1.Pod{pod("web", "n", "ReplicaSet")}, true, true, "nodeclaim", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var claims []*unstructured.Unstructured
			if tc.claim {
				claims = append(claims, claim("claim-n", "n", ""))
			}
			f := newFixture(t, PolicyReplace, []*corev1.Node{tc.node}, claims...)
			f.c.cfg.NodeClaims, f.c.cfg.ReplaceInService = true, tc.optIn
			f.c.cfg.FleetBudget = mustBudget(t, "2")
			for _, p := range tc.pods {
				if err := f.client.Tracker().Add(p); err != nil {
					t.Fatal(err)
				}
			}
			f.scan(f.cached("n")...)
			nodeGone := f.node("n") == nil
			claimGone := tc.claim && f.count("delete_nodeclaim", "success") == 1
			switch {
			case tc.wantDeleted == "node" && !nodeGone, tc.wantDeleted != "node" && nodeGone:
				t.Errorf("node deleted %v, want %q", nodeGone, tc.wantDeleted)
			case tc.wantDeleted == "nodeclaim" && !claimGone, tc.wantDeleted != "nodeclaim" && claimGone:
				t.Errorf("nodeclaim deleted %v, want %q", claimGone, tc.wantDeleted)
			}
			if tc.wantReason == "" {
				return
			}
			if got := testutil.ToFloat64(f.c.blocked.WithLabelValues(tc.wantReason)); got != 1 {
				t.Errorf("node_remediation_blocked_nodes{reason=%q} = %v, want 1", tc.wantReason, got)
			}
			if tc.wantReason != blockedInService && len(f.patches()) != 0 {
				t.Errorf("a node held on the fresh read was written: %s", f.patches()[0].GetPatch())
			}
			if ev := f.recorded(); len(ev) != 1 || !strings.Contains(ev[0], "not replaced") {
				t.Errorf("events %q, want one saying why it is not replaced", ev)
			}
		})
	}
}
