//go:build e2e

package fleet_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// rollout plays restarts of the agents' DaemonSet pods as the endpointslice
// controller shows them: each restarted agent's endpoint turns not ready in
// its slice of the agents' headless Service, then ready again, one agent
// every pace. Each change is an event to every agent that follows the slice
// (its peers): about 100 since agents follow one slice each
// (endpoints.PeerSlices), every agent before, when the cost of a rollout grew
// with the fleet squared. It reports, per restarted agent, the watch events and bytes the
// API server sent for EndpointSlices and the CPU it and this process (the
// agents receiving them) used.
func rollout(b *testing.B, n, restarts int, pace time.Duration) {
	b.Helper()
	ctx := b.Context()
	events0, bytes0 := sliceWatchEvents(b)
	api0, self0 := usage(b, cp.APIServer()), selfCPU(b)
	start := time.Now()
	for i := range restarts {
		node := i * n / restarts
		for _, ready := range []bool{false, true} {
			if err := setPeerReady(ctx, node, ready); err != nil {
				b.Fatal(err)
			}
			time.Sleep(pace / 2)
		}
	}
	w := time.Since(start)
	events1, bytes1 := sliceWatchEvents(b)
	api1, self1 := usage(b, cp.APIServer()), selfCPU(b)
	perRestart := func(v float64) float64 { return v / float64(restarts) }
	events, mib := perRestart(events1-events0), perRestart(bytes1-bytes0)/(1<<20)
	apiCPU, agentsCPU := perRestart((api1.CPU - api0.CPU).Seconds()), perRestart((self1 - self0).Seconds())
	logf(b, "rollout of %d agents' pods of %d, one every %s (%.0f s): per restarted pod the API server sent %.0f EndpointSlice watch events, %.1f MiB, and used %.3f CPU-seconds; the agents (this process) %.3f CPU-seconds",
		restarts, n, pace, w.Seconds(), events, mib, apiCPU, agentsCPU)
	b.ReportMetric(events, "rollout-slice-events/pod")
	b.ReportMetric(mib, "rollout-slice-MiB/pod")
	b.ReportMetric(apiCPU, "rollout-apiserver-cpu-s/pod")
}

// setPeerReady sets the readiness of the i-th node's endpoint in the agents'
// slices PublishAgentPeers wrote (100 endpoints a slice, in node order).
func setPeerReady(ctx context.Context, i int, ready bool) error {
	name := harness.AgentPeerService
	if i >= 100 {
		name = fmt.Sprintf("%s-%d", name, i/100)
	}
	slices := cp.Client.DiscoveryV1().EndpointSlices(harness.AgentNamespace)
	s, err := slices.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get EndpointSlice %s: %w", name, err)
	}
	s.Endpoints[i%100].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(ready)}
	if _, err := slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update EndpointSlice %s: %w", name, err)
	}
	return nil
}

// sliceWatchEvents is the API server's count and total size of the watch
// events it sent for EndpointSlices.
func sliceWatchEvents(b *testing.B) (events, bytes float64) {
	b.Helper()
	body, err := cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	sum := func(name string) float64 {
		samples, err := harness.Samples(strings.NewReader(string(body)), name)
		if err != nil {
			b.Fatal(err)
		}
		var v float64
		for _, s := range samples {
			if strings.Contains(s.Labels, "endpointslices") {
				v += s.Value
			}
		}
		return v
	}
	return sum("apiserver_watch_events_total"), sum("apiserver_watch_events_sizes_sum")
}
