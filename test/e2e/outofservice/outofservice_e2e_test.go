//go:build e2e

// Package outofservice_test tests the out-of-service cleanup plugin on real
// nodes with kube-controller-manager's attach-detach, pod GC, node lifecycle
// and taint eviction controllers at their defaults: the scenario of
// test/bench/outofservice (a pod whose CSI volume is attached and in use on a
// node that is switched off and deleted). What happens without the plugin
// (kube-controller-manager waits its 6-minute force-detach timeout) is
// Kubernetes' behaviour, not ours: BenchmarkDetachAfterDelete measures it
// beside the plugin's figure.
package outofservice_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/bench/outofservice"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var c *harness.Cluster

func TestMain(m *testing.M) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, Nodes: 2},
		func(_ context.Context, cluster *harness.Cluster) error { c = cluster; return nil })
}

// TestOutOfServiceDetachesAtOnce: a pod with a CSI volume runs on a node
// (the volume attached and in use); the node is switched off, then deleted.
// The webhook taints it out of service once kube-controller-manager marked
// it Unknown and the grace passed, the taint evicts the pod, pod GC
// force-deletes it and the attach-detach controller detaches at once, well
// within kube-controller-manager's 6-minute force-detach timeout. Beside
// it, a node deleted while its kubelet runs is never tainted: its cleanup
// ends with the plugin skipped. Times are logged as figures.
func TestOutOfServiceDetachesAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := outofservice.Setup(ctx, t, c)
	live, with := c.Nodes[0], c.Nodes[1]

	w := s.StartWebhook(t, "webhook-oos", "10.213.0.71", outofservice.WithPlugin)
	for _, n := range []string{live.Name, with.Name} {
		s.WaitFinalizer(ctx, t, n)
	}
	s.Volume(ctx, t, with, "with")
	liveDeleted := time.Now()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, live.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Within 5 minutes: before the 6-minute force detach that follows
	// without the plugin.
	r := s.SwitchOffAndDelete(ctx, t, with, "with", 5*time.Minute)
	if r.TaintedAt.IsZero() {
		t.Fatalf("node %s was never tainted %s", with.Name, plugins.OutOfServiceTaint.ToString())
	}
	if !r.UnknownAtTaint {
		t.Errorf("node %s was tainted while its Ready condition was not Unknown", with.Name)
	}
	if r.VAGoneAt.IsZero() {
		t.Fatalf("the VolumeAttachment of node %s was not gone within 5m", with.Name)
	}
	t.Logf("figure: with out-of-service: node deleted -> Ready Unknown %s, -> tainted %s, -> pod gone %s, -> VolumeAttachment gone %s, -> Node gone %s",
		r.Since(r.UnknownAt), r.Since(r.TaintedAt), r.Since(r.PodGoneAt), r.Since(r.VAGoneAt), r.Since(r.NodeGoneAt))

	// The live node's cleanup ended (the plugin waited 2m, then skipped)
	// and it was never tainted: the positive signal is the Event.
	c.WaitEvent(t, 3*time.Minute, "Node", live.Name, api.EventCleanupCompleted, "out-of-service=skipped")
	t.Logf("figure: live node: deleted -> cleanup completed with out-of-service skipped %s", time.Since(liveDeleted).Round(time.Second))
	if taintSeen(w.LogT(t), live.Name) {
		t.Errorf("node %s, whose kubelet answered, was tainted out of service", live.Name)
	}
}

// taintSeen reports whether the webhook's log says it tainted node.
func taintSeen(logText, node string) bool {
	for _, line := range strings.Split(logText, "\n") {
		if strings.Contains(line, `"msg":"node tainted out of service`) && strings.Contains(line, fmt.Sprintf(`"node":%q`, node)) {
			return true
		}
	}
	return false
}
