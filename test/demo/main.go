// Command demo runs kube-node-ready on a real local control plane: five
// simulated nodes, each played by a real agent process, verified live; then
// one node's DNS breaks and it is re-tainted, and another node is deleted and
// cleaned up by the webhook. It runs until Ctrl-C. `make demo` runs it.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/test/agentenv"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const nodes = 5

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

type demoNode struct {
	harness.Node
	resolvConf string
	agent      *harness.Process
}

func run(ctx context.Context) error {
	log.SetFlags(log.Ltime)
	cp, err := harness.Start(ctx, harness.Options{Logf: log.Printf})
	if err != nil {
		return err
	}
	defer cp.Stop()
	if err := agentenv.InstallRBAC(ctx, cp); err != nil {
		return err
	}
	webhook, err := startWebhook(ctx, cp)
	if err != nil {
		return err
	}
	defer webhook.Stop(10 * time.Second)

	var ns []*demoNode
	var hn []harness.Node
	for i := 1; i <= nodes; i++ {
		n, err := cp.CreateNode(ctx, fmt.Sprintf("demo-node-%d", i), harness.NodeOptions{})
		if err != nil {
			return err
		}
		ns = append(ns, &demoNode{Node: n})
		hn = append(hn, n)
	}
	if err := agentenv.PublishPeers(ctx, cp, hn...); err != nil {
		return err
	}
	step("5 nodes created with the startup taint; starting one agent per node")
	for _, n := range ns {
		// Each node gets its own resolv.conf, so one node's DNS can break alone.
		n.resolvConf = filepath.Join(cp.Dir, n.Name+".resolv.conf")
		if err := copyFile(cp.ResolvConf, n.resolvConf); err != nil {
			return err
		}
		kubeconfig, err := agentenv.Kubeconfig(ctx, cp, agentenv.ServiceAccount, n.Node)
		if err != nil {
			return err
		}
		args := append(agentenv.Args(cp, n.Node, kubeconfig),
			"--check.dns.resolv-conf="+n.resolvConf, "--check-period=3s", "--check-timeout=1s", "--initial-backoff=250ms")
		if n.agent, err = agentenv.Start(cp, n.Node, args); err != nil {
			return err
		}
		defer n.agent.Stop(5 * time.Second)
	}
	if err := watchTable(ctx, cp, ns, "all nodes verified", func(rows []row) bool {
		return !slices.ContainsFunc(rows, func(r row) bool { return r.tainted })
	}); err != nil {
		return err
	}

	broken := ns[2]
	step(fmt.Sprintf("breaking DNS on %s: its resolver now points at an address where nothing answers", broken.Name))
	if err := os.WriteFile(broken.resolvConf, []byte("nameserver 10.213.0.250\n"), 0o644); err != nil {
		return err
	}
	if err := watchTable(ctx, cp, ns, broken.Name+" re-tainted after 3 failed rounds", func(rows []row) bool {
		return slices.ContainsFunc(rows, func(r row) bool { return r.name == broken.Name && r.tainted })
	}); err != nil {
		return err
	}

	gone := ns[4]
	step(fmt.Sprintf("deleting %s: the webhook's finalizer holds it until its volumes are detached and it is logged", gone.Name))
	if err := attachVolume(ctx, cp, gone.Name); err != nil {
		return err
	}
	if err := deleteAndWatchCleanup(ctx, cp, gone.Name); err != nil {
		return err
	}

	kubectl := filepath.Join(cp.BinDir, "kubectl")
	enter := fmt.Sprintf("nsenter --net=/proc/%d/ns/net", os.Getpid())
	fmt.Printf(`
The cluster runs in its own network namespace (pid %d). From another shell, as root:

  %s %s --kubeconfig %s get nodes -L node-ready/verified
  %s %s --kubeconfig %s get events -A --field-selector involvedObject.kind=Node
  %s %s --kubeconfig %s annotate node %s node-ready/skip-verification=true
  %s curl -s http://%s:8080/metrics | grep ^node_
  tail -f %s/agent-%s.log     # what kubectl logs -l app=kube-node-ready shows in a cluster

Component logs are in %s. Press Ctrl-C to stop and clean up.
`, os.Getpid(), enter, kubectl, cp.Kubeconfig, enter, kubectl, cp.Kubeconfig, enter, kubectl, cp.Kubeconfig, broken.Name,
		enter, ns[0].IP, cp.Dir, broken.Name, cp.Dir)
	<-ctx.Done()
	return nil
}

func step(msg string) { fmt.Printf("\n==> %s\n", msg) }

type row struct {
	name     string
	tainted  bool
	verified string
	checks   string
}

// watchTable prints the node table whenever it changes until done holds.
func watchTable(ctx context.Context, cp *harness.ControlPlane, ns []*demoNode, goal string, done func([]row) bool) error {
	var last string
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(2 * time.Minute)
	for {
		rows, err := table(ctx, cp, ns)
		if err != nil {
			return err
		}
		var b strings.Builder
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tTAINTED\tVERIFIED\tLAST CHECKS")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\n", r.name, r.tainted, r.verified, r.checks)
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

func table(ctx context.Context, cp *harness.ControlPlane, ns []*demoNode) ([]row, error) {
	var rows []row
	for _, n := range ns {
		node, err := cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == harness.StartupTaint.Key })
		verified := node.Labels["node-ready/verified"]
		if verified == "" {
			verified = "-"
		}
		rows = append(rows, row{name: n.Name, tainted: tainted, verified: verified, checks: checkSummary(n)})
	}
	return rows, nil
}

// checkSummary reads node_check_success from the agent's /metrics.
func checkSummary(n *demoNode) string {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + n.IP + ":8080/metrics")
	if err != nil {
		return "(agent not serving yet)"
	}
	defer resp.Body.Close()
	var parts []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `node_check_success{check="`)
		if !ok {
			continue
		}
		name, val, _ := strings.Cut(rest, `"} `)
		mark := "ok"
		if val != "1" {
			mark = "FAIL"
		}
		parts = append(parts, name+" "+mark)
	}
	if len(parts) == 0 {
		return "(first round running)"
	}
	return strings.Join(parts, ", ")
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
