//go:build e2e

package outofservice_test

import (
	"context"
	"fmt"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/kube-node-ready/kube-node-ready/test/bench/outofservice"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var c *harness.Cluster

func TestMain(m *testing.M) {
	harness.MainWithCluster(m, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, Nodes: 1},
		func(_ context.Context, cluster *harness.Cluster) error { c = cluster; return nil })
}

// BenchmarkDetachAfterDelete times, from a switched-off node's delete, how
// long the VolumeAttachment of its pod's volume lives, with the
// out-of-service cleanup plugin (defaults: grace 30 s, wait 2 m) and without
// it (the chart's default, log only). Without it the Node goes at once, pod
// GC deletes the orphaned pod, and kube-controller-manager's attach-detach
// controller waits its 6-minute force-detach timeout because the volume was
// last reported in use: Kubernetes' behaviour, the contrast to what
// test/e2e/outofservice asserts. Each iteration joins two real nodes, one
// per half; a run takes about 9 minutes.
//
//	make build && go test -tags e2e -run '^$' -bench DetachAfterDelete -benchtime 1x -timeout 30m ./test/bench/outofservice/
func BenchmarkDetachAfterDelete(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := outofservice.Setup(ctx, b, c)
	var with, without []time.Duration
	for i := range b.N {
		r := detach(ctx, b, s, fmt.Sprintf("with-%d", i), "10.213.0.71", outofservice.WithPlugin, 5*time.Minute)
		if r.TaintedAt.IsZero() {
			b.Fatalf("with the plugin: node with-%d was never tainted out of service", i)
		}
		b.Logf("figure: with out-of-service: node deleted -> Ready Unknown %s, -> tainted %s, -> pod gone %s, -> VolumeAttachment gone %s, -> Node gone %s",
			r.Since(r.UnknownAt), r.Since(r.TaintedAt), r.Since(r.PodGoneAt), r.Since(r.VAGoneAt), r.Since(r.NodeGoneAt))
		with = append(with, r.VAGoneAt.Sub(r.Deleted))

		r = detach(ctx, b, s, fmt.Sprintf("without-%d", i), "10.213.0.72", outofservice.WithoutPlugin, 10*time.Minute)
		if !r.TaintedAt.IsZero() {
			b.Fatalf("without the plugin: node without-%d was tainted out of service", i)
		}
		b.Logf("figure: without out-of-service: node deleted -> Node gone %s, -> pod gone %s, -> VolumeAttachment gone %s",
			r.Since(r.NodeGoneAt), r.Since(r.PodGoneAt), r.Since(r.VAGoneAt))
		without = append(without, r.VAGoneAt.Sub(r.Deleted))
	}
	b.ReportMetric(median(with).Seconds(), "with-detach-s")
	b.ReportMetric(median(without).Seconds(), "without-detach-s")
}

// detach runs one half: a webhook with config leads, a node named name
// joins and gets the finalizer, a pod uses a volume on it, and the node is
// switched off and deleted; the webhook stops once the VolumeAttachment
// and the pod are gone, which must happen within timeout.
func detach(ctx context.Context, b *testing.B, s *outofservice.Scenario, name, ip, config string, timeout time.Duration) outofservice.Run {
	b.Helper()
	w := s.StartWebhook(b, "webhook-"+name, ip, config)
	n, err := c.AddNode(ctx, harness.RealNodeOptions{Name: name})
	if err != nil {
		b.Fatal(err)
	}
	s.WaitFinalizer(ctx, b, n.Name)
	s.Volume(ctx, b, n, name)
	r := s.SwitchOffAndDelete(ctx, b, n, name, timeout)
	if r.VAGoneAt.IsZero() {
		b.Fatalf("%s: the VolumeAttachment of node %s was not gone within %s", config, n.Name, timeout)
	}
	if err := w.Stop(10 * time.Second); err != nil {
		b.Fatal(err)
	}
	return r
}

// median of ds, which is not empty.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
