// Command demo runs the local control plane of the test harness until Ctrl-C,
// so a person can look at it with kubectl. `make demo` runs it.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func main() {
	if err := harness.EnterNetworkNamespace(); err != nil {
		log.Fatalf("demo: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		log.Fatalf("demo: %v", err)
	}
}

func run(ctx context.Context) error {
	cp, err := harness.Start(ctx, harness.Options{Logf: log.Printf})
	if err != nil {
		return err
	}
	defer cp.Stop()
	for i := 1; i <= 3; i++ {
		n, err := cp.CreateNode(ctx, fmt.Sprintf("demo-node-%d", i), harness.NodeOptions{})
		if err != nil {
			return err
		}
		log.Printf("created node %s (%s) with taint %s", n.Name, n.IP, harness.StartupTaint.ToString())
	}
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	fmt.Printf(`
The control plane runs in its own network namespace (pid %d). Try, from another shell as root:

  nsenter --net=/proc/%d/ns/net %s --kubeconfig %s get nodes -o wide

Admin kubeconfig: %s
Component logs:   %s/*.log
Press Ctrl-C to stop and clean up.
`, os.Getpid(), os.Getpid(), kubectl, cp.Kubeconfig, cp.Kubeconfig, cp.Dir)
	<-ctx.Done()
	log.Printf("stopping")
	return nil
}
