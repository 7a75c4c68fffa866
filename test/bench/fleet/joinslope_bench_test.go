//go:build e2e

package fleet_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/test/bench/fleet"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var (
	joinSizes = flag.String("fleet.join-sizes", "100,1000,2000,10000", "BenchmarkJoinSlope: the fleet sizes (agents' endpoints in the peer Service, 100 a slice) a node joins beside")
	joinHint  = flag.Bool("fleet.join-hint", true, "BenchmarkJoinSlope: create the joining Nodes with the webhook's hint of their peer slices (the annotation admission writes); false: without, as a node created while the webhook was down")
)

// BenchmarkJoinSlope measures what a joining agent asks of the API server
// as the fleet grows: at each of -fleet.join-sizes, the agents' headless
// Service holds that many agents' endpoints (one EndpointSlice per 100, as
// the endpointslice controller writes them), and `joins` nodes join one
// after the other, each with a simulated agent (the real agent code, its
// own client, the chart's RBAC, default flags; its Node created with the
// annotation the webhook's admission writes, naming its first peer slices,
// unless -fleet.join-hint=false); from its start until it
// logged its untaint: its requests (audit log, a watch counted when it
// started), the response bytes its client read (watch streams included),
// of which the choice of its peer slices, and the API server's time on
// its requests (received to completed, watches left out). Beside them, as
// a reference, what the choice read before (every slice of the Service,
// protobuf, from the watch cache), reads now (their names: metadata only,
// protobuf) and would read as a Table (names and address types, JSON),
// each listed five times by the benchmark itself. The other nodes of the fleet
// are not created: a join reads its own Node, and of the fleet only the
// peer Service's slices.
func BenchmarkJoinSlope(b *testing.B) {
	ctx := b.Context()
	logf(b, "machine: %s", machine())
	var sizes []int
	for _, f := range strings.Split(*joinSizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("-fleet.join-sizes: %v", err)
		}
		sizes = append(sizes, n)
	}
	var peers []harness.Node
	for _, n := range sizes {
		for len(peers) < n {
			ip, err := cp.NewAddress()
			if err != nil {
				b.Fatal(err)
			}
			peers = append(peers, harness.Node{Name: fmt.Sprintf("peer-%d", len(peers)), IP: ip})
		}
		if err := cp.PublishAgentPeers(ctx, peers[:n]...); err != nil {
			b.Fatal(err)
		}
		fullBytes, fullServer := listCost(b, "full")
		namesBytes, namesServer := listCost(b, "names")
		tableBytes, tableServer := listCost(b, "table")
		var reqs, read, choice, server []float64
		for i := range joins {
			r, by, ch, st := joinOnce(b, fmt.Sprintf("slope-%d-%d", n, i))
			reqs, read, choice, server = append(reqs, r), append(read, by), append(choice, ch), append(server, st)
		}
		logf(b, "%5d agents (%d slices): a join, median of %d: %.0f requests, %.1f KiB read (choosing the slices: %.1f KiB), %.1f ms at the API server; "+
			"listing every slice: %.1f KiB, %.2f ms at the server; their names (metadata): %.1f KiB, %.2f ms; a Table of their names and address types: %.1f KiB, %.2f ms",
			n, (n+99)/100, joins, median(reqs), median(read)/1024, median(choice)/1024, median(server),
			fullBytes/1024, fullServer, namesBytes/1024, namesServer, tableBytes/1024, tableServer)
		b.ReportMetric(median(reqs), fmt.Sprintf("join-requests-%d", n))
		b.ReportMetric(median(read), fmt.Sprintf("join-bytes-%d", n))
		b.ReportMetric(median(server), fmt.Sprintf("join-server-ms-%d", n))
	}
}

// joinOnce creates a node, starts a simulated agent for it, and returns,
// once the agent logged its untaint, its requests until then, the
// response bytes its client had read (all, and of the slice lists that
// name no slice: the choice), and the API server's milliseconds on its
// requests. The node and agent are removed again.
func joinOnce(b *testing.B, name string) (requests, read, choice, serverMS float64) {
	b.Helper()
	ctx := b.Context()
	var opts harness.NodeOptions
	if *joinHint {
		hint, err := fleet.PeerSlicesHint(ctx, cp.Client, name)
		if err != nil {
			b.Fatal(err)
		}
		opts.Annotations = hint
	}
	node, err := cp.CreateNode(ctx, name, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer cp.RemoveNode(b, name)
	offset, err := fleet.AuditOffset(cp.AuditLogPath())
	if err != nil {
		b.Fatal(err)
	}
	untainted := &fleet.UntaintLog{}
	f := fleet.New(cp, fleet.Options{SharedListener: true, CountTraffic: true, Log: untainted})
	defer func() {
		if err := f.Stop(); err != nil {
			b.Error(err)
		}
	}()
	if err := f.Start(ctx, node); err != nil {
		b.Fatal(err)
	}
	var at time.Time
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		at = untainted.At(name)
		return !at.IsZero(), nil
	})
	if err != nil {
		b.Fatalf("%s: no untaint logged: %v", name, err)
	}
	traffic := f.Agents()[0].Traffic
	untaintBytes, ok := traffic.BytesAtUntaint()
	if !ok {
		b.Fatalf("%s: its untaint was logged, but its traffic did not note it", name)
	}
	read = float64(untaintBytes)
	for _, kind := range traffic.Kinds() {
		if fleet.IsSliceList(kind) {
			choice += float64(traffic.BytesOf(kind))
		}
	}
	if err := f.Stop(); err != nil {
		b.Fatal(err)
	}
	joined, err := fleet.RequestsUntil(cp.AuditLogPath(), offset, at)
	if err != nil {
		b.Fatal(err)
	}
	j := joined[name]
	if j == nil {
		b.Fatalf("%s: no request in the audit log", name)
	}
	for _, c := range j.Requests {
		requests += float64(c)
	}
	return requests, read, choice, float64(j.ServerTime) / float64(time.Millisecond)
}

// listCost lists the agents' Service's slices five times from the watch
// cache, how: "full" as the agent's client would (protobuf), "names" as
// metadata only (protobuf), "table" as a Table without the objects (JSON),
// and returns the bytes of one answer as read, and the API
// server's mean milliseconds on one (apiserver_request_duration_seconds).
func listCost(b *testing.B, how string) (bytes, serverMS float64) {
	b.Helper()
	ctx := b.Context()
	traffic := &fleet.Traffic{}
	cfg := rest.CopyConfig(cp.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	cfg.Wrap(fleet.CountInto(traffic))
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + harness.AgentPeerService, ResourceVersion: "0"}
	const lists = 5
	sum0, n0 := listMetric(b)
	for range lists {
		if how == "table" {
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			err = cs.DiscoveryV1().RESTClient().Get().Namespace(harness.AgentNamespace).Resource("endpointslices").
				Param("labelSelector", opts.LabelSelector).Param("resourceVersion", "0").Param("includeObject", "None").
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Error()
			if err != nil {
				b.Fatal(err)
			}
			continue
		}
		if how == "names" {
			meta, err := metadata.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := meta.Resource(discoveryv1.SchemeGroupVersion.WithResource("endpointslices")).Namespace(harness.AgentNamespace).List(ctx, opts); err != nil {
				b.Fatal(err)
			}
			continue
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := cs.DiscoveryV1().EndpointSlices(harness.AgentNamespace).List(ctx, opts); err != nil {
			b.Fatal(err)
		}
	}
	sum1, n1 := listMetric(b)
	if n1-n0 < lists {
		b.Fatalf("the API server counted %.0f lists of EndpointSlices, want %d", n1-n0, lists)
	}
	return float64(traffic.Bytes()) / lists, 1000 * (sum1 - sum0) / (n1 - n0)
}

// listMetric is the API server's total time on lists of EndpointSlices and
// their count.
func listMetric(b *testing.B) (seconds, count float64) {
	b.Helper()
	match := []string{`verb="LIST"`, `resource="endpointslices"`}
	seconds, err := sumAPIServerMetric(b.Context(), "apiserver_request_duration_seconds_sum", match...)
	if err == nil {
		count, err = sumAPIServerMetric(b.Context(), "apiserver_request_duration_seconds_count", match...)
	}
	if err != nil {
		b.Fatal(err)
	}
	return seconds, count
}

// median of xs (which it sorts).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
