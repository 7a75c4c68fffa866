// Command demo installs kube-node-ready with helm into a local cluster of
// real nodes (kubelet, containerd, runc, CNI and kube-proxy in namespaces of
// their own) and tells its story with a live table: the nodes are verified;
// one node's DNS breaks and it is re-tainted; another node is switched off,
// deleted and cleaned up by the webhook. It runs until Ctrl-C and then removes
// everything. `make demo` runs it (after `make tools images`).
package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	nodes     = 3
	namespace = "kube-node-ready"
)

func main() {
	if err := harness.EnterNetworkNamespace(); err != nil {
		log.Fatalf("demo: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil && ctx.Err() == nil {
		log.Fatalf("demo: %v", err)
	}
	log.Printf("stopped; everything cleaned up")
}

// The demo's values, besides the local images: a short period so the story
// fits in a minute, and the volumeattachments and log cleanup plugins.
const (
	agentValues   = "checkPeriod: 3s\ncheckTimeout: 1s\ninitialBackoff: 250ms"
	webhookValues = "cleanup:\n  plugins:\n    volumeattachments: {critical: true, timeout: 30s}\n    log: {after: [volumeattachments]}"
)

func run(ctx context.Context) error {
	log.SetFlags(log.Ltime)
	root, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	step(fmt.Sprintf("starting a cluster of %d real nodes (kubelet + containerd + kube-proxy each)", nodes))
	c, err := harness.StartCluster(ctx, harness.ClusterOptions{Options: harness.Options{Logf: log.Printf}, Nodes: nodes, ProjectImages: true})
	if err != nil {
		return err
	}
	defer c.Stop()
	v, err := c.LocalImageValues(agentValues, webhookValues)
	if err != nil {
		return err
	}
	valuesFile := filepath.Join(c.Dir, "demo-values.yaml")
	if err := os.WriteFile(valuesFile, []byte(v), 0o644); err != nil {
		return err
	}
	step("helm install kube-node-ready charts/kube-node-ready --namespace " + namespace + " --create-namespace --wait")
	if _, err := c.Helm(ctx, "install", "kube-node-ready", filepath.Join(root, "charts", "kube-node-ready"), "--namespace", namespace,
		"--create-namespace", "--values", valuesFile, "--wait", "--timeout", "3m"); err != nil {
		return err
	}
	if err := watchTable(ctx, c, "all nodes verified", func(rows []row) bool {
		return !slices.ContainsFunc(rows, func(r row) bool { return r.tainted })
	}); err != nil {
		return err
	}

	broken := c.Nodes[1]
	step(fmt.Sprintf("breaking DNS on %s: its node now drops every DNS query its pods send", broken.Name))
	// Only queries from this node's pods: a CoreDNS replica that happens to
	// run here keeps answering the other nodes, so only this node is broken.
	for _, proto := range []string{"udp", "tcp"} {
		if _, err := broken.Exec(ctx, "iptables", "-I", "FORWARD", "-s", broken.PodCIDR, "-p", proto, "--dport", "53", "-j", "DROP"); err != nil {
			return err
		}
	}
	if err := watchTable(ctx, c, broken.Name+" re-tainted after 3 failed rounds", func(rows []row) bool {
		return slices.ContainsFunc(rows, func(r row) bool { return r.name == broken.Name && r.tainted })
	}); err != nil {
		return err
	}

	gone := c.Nodes[2]
	step(fmt.Sprintf("switching %s off and deleting it: the webhook's finalizer holds it until its volumes are detached and it is logged", gone.Name))
	if err := attachVolume(ctx, c.ControlPlane, gone.Name); err != nil {
		return err
	}
	if err := gone.Stop(); err != nil {
		log.Printf("stop %s: %v", gone.Name, err)
	}
	if err := deleteAndWatchCleanup(ctx, c, gone.Name); err != nil {
		return err
	}

	kubectl := filepath.Join(c.BinDir, "kubectl")
	enter := fmt.Sprintf("nsenter --net=/proc/%d/ns/net", os.Getpid())
	k := fmt.Sprintf("%s %s --kubeconfig %s", enter, kubectl, c.Kubeconfig)
	pod := ""
	if pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready"}); err == nil && len(pods.Items) > 0 {
		pod = pods.Items[0].Status.PodIP
	}
	fmt.Printf(`
The cluster runs in its own network namespace (pid %d). From another shell, as root:

  %s get nodes -L node-ready/verified
  %s get pods -A -o wide
  %s logs -n %s -l app=kube-node-ready
  %s get events -A --field-selector involvedObject.kind=Node
  %s annotate node %s node-ready/skip-verification=true
  %s curl -s http://%s:8080/metrics | grep ^node_

Component logs are in %s. Press Ctrl-C to stop and clean up.
`, os.Getpid(), k, k, k, namespace, k, k, broken.Name, enter, pod, c.Dir)
	return watchTable(ctx, c, "", func([]row) bool { return false })
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

type row struct {
	name     string
	ready    string
	tainted  bool
	verified string
	pod      string
	checks   string
}

// watchTable prints the node table whenever it changes until done holds
// (with no goal, until ctx ends).
func watchTable(ctx context.Context, c *harness.Cluster, goal string, done func([]row) bool) error {
	var last string
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var deadline <-chan time.Time
	if goal != "" {
		deadline = time.After(2 * time.Minute)
	}
	for {
		rows, err := table(ctx, c)
		if err != nil {
			return err
		}
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tREADY\tTAINTED\tVERIFIED\tAGENT POD\tLAST CHECKS")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", r.name, r.ready, r.tainted, r.verified, r.pod, r.checks)
		}
		tw.Flush()
		if s := b.String(); s != last {
			fmt.Printf("\n%s  %s", time.Now().Format("15:04:05"), s)
			last = s
		}
		if done(rows) {
			fmt.Printf("--> %s\n", goal)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%s: not reached within 2 minutes", goal)
		case <-tick.C:
		}
	}
}

func table(ctx context.Context, c *harness.Cluster) ([]row, error) {
	pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=kube-node-ready"})
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, n := range c.Nodes {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r := row{name: n.Name, ready: "NotReady", verified: node.Labels["node-ready/verified"], pod: "-", checks: "-"}
		r.tainted = slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == harness.StartupTaint.Key || t.Key == harness.UnhealthyTaint.Key
		})
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				r.ready = "Ready"
			}
		}
		if r.verified == "" {
			r.verified = "-"
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil {
				r.pod = fmt.Sprintf("%s %s", p.Name, p.Status.Phase)
				if p.Status.PodIP != "" {
					r.checks = checkSummary(p.Status.PodIP)
				}
			}
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// checkSummary reads node_check_success from the agent's /metrics.
func checkSummary(podIP string) string {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + net.JoinHostPort(podIP, strconv.Itoa(harness.MetricsPort)) + "/metrics")
	if err != nil {
		return "(agent not serving yet)"
	}
	defer resp.Body.Close()
	samples, _ := harness.Samples(resp.Body, "node_check_success")
	var parts []string
	for _, s := range samples {
		mark := "ok"
		if s.Value != 1 {
			mark = "FAIL"
		}
		parts = append(parts, s.Label("check")+" "+mark)
	}
	if len(parts) == 0 {
		return "(first round running)"
	}
	return strings.Join(parts, ", ")
}
