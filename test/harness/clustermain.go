package harness

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// MainWithCluster is TestMain for packages whose tests share one cluster of
// real nodes, as MainWithControlPlane is for a control plane: it enters the
// network namespace, starts the cluster with opts (waiting, within
// startTimeout, for another process's real nodes to stop first), hands it
// to setup (which typically stores it in a package variable), runs the
// tests, prints the components' logs if they failed, stops the cluster and
// exits.
func MainWithCluster(m *testing.M, opts ClusterOptions, startTimeout time.Duration, setup func(*Cluster)) {
	if err := EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	c, err := StartCluster(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness: start cluster:", err)
		os.Exit(1)
	}
	setup(c)
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "cluster logs:\n%s", c.Logs(40))
	}
	c.Stop()
	os.Exit(code)
}
