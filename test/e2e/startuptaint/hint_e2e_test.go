//go:build e2e

package startuptaint

import (
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// TestPeerSlicesHintAtCreation: the webhook, run with the chart's
// arguments and RBAC (a Role to list and watch EndpointSlices in its
// namespace), annotates a new Node with the first of the agents' Service's
// slices in that node's ranking (api.FormatPeerSlices, the agent's own), as
// the same admission that adds the finalizer; a node created before the
// webhook gets none, from admission or back-fill.
func TestPeerSlicesHintAtCreation(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	ctx := t.Context()

	chart, err := cp.RenderChartWebhook(ctx, ns, "https://"+webhookIP+":8443/mutate-node", values)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(chart.Args, "--"+api.PeerServiceFlag+"="+harness.AgentPeerService) {
		t.Fatalf("the chart does not give the webhook the agents' Service %s: %q", harness.AgentPeerService, chart.Args)
	}
	if err := cp.ApplyChartRBAC(ctx, ns); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	peers := make([]harness.Node, 1000)
	for i := range peers {
		ip, err := cp.NewAddress()
		if err != nil {
			t.Fatal(err)
		}
		peers[i] = harness.Node{Name: fmt.Sprintf("peer-%d", i), IP: ip}
	}
	if err := cp.PublishAgentPeers(ctx, peers...); err != nil {
		t.Fatal(err)
	}
	list, err := cp.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + harness.AgentPeerService})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	if len(names) <= api.PeerSlicesHintLen {
		t.Fatalf("%d slices for %d agents: want more than the hint names", len(names), len(peers))
	}

	before := create(t, cp, "before", linux(nil))
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, chart.Config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := cp.StartWebhook(t, "webhook", webhookIP, append([]string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=webhook", "--extra-sans=" + webhookIP,
		"--webhook-config-name=" + chart.Config.Name, "--log-level=debug",
	}, chart.Args...)...)
	d.WaitReady(t, 30*time.Second)
	waitAdmission(t, cp)

	// Its watch of the names lists beside admission, never before it: the
	// first nodes may come without the hint, until one has it.
	i := 0
	var got string
	harness.Eventually(t, 30*time.Second, "a new node carries the hint", func() (bool, string) {
		i++
		n := create(t, cp, fmt.Sprintf("new-%d", i), linux(nil))
		if !slices.Contains(n.Finalizers, api.Finalizer) {
			t.Fatalf("%s admitted without the finalizer: %v", n.Name, n.Finalizers)
		}
		got = n.Annotations[api.PeerSlicesAnnotation]
		return got != "", "none on " + n.Name
	})
	name := fmt.Sprintf("new-%d", i)
	if want := api.FormatPeerSlices(name, names); got != want {
		t.Errorf("%s's hint %q, want %q", name, got, want)
	}
	if hint, all := api.ParsePeerSlices(got); len(hint) != api.PeerSlicesHintLen || all {
		t.Errorf("%s's hint %q parses to %q, %v", name, got, hint, all)
	}
	// Back-fill (the anchor: it gave the old node the finalizer) adds no hint.
	harness.Eventually(t, 30*time.Second, "back-fill reached the node from before", func() (bool, string) {
		before = cp.GetNode(t, before.Name)
		return slices.Contains(before.Finalizers, api.Finalizer), "no finalizer yet"
	})
	if h, ok := before.Annotations[api.PeerSlicesAnnotation]; ok {
		t.Errorf("the node from before the webhook got a hint: %q", h)
	}
}
