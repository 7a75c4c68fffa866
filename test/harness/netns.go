package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The simulated cluster lives in a private network namespace of its own: inside it
// ClusterNet is routed to the loopback device, so every address in it is local,
// yet (unlike 127.0.0.0/8) the API server accepts it in Endpoints and
// EndpointSlices. The namespace has no other interface and no default route, so
// nothing the tests send can leave the machine.
const (
	// ClusterNet is the address range of the simulated cluster.
	ClusterNet = "10.213.0.0/16"
	// APIServerIP is the address the API server advertises (the kubernetes Service endpoint).
	APIServerIP = "10.213.0.1"
	// DNSPodIP is the address CoreDNS listens on, as the kube-dns pod IP.
	DNSPodIP = "10.213.0.2"
	// ServiceCIDR is the Service ClusterIP range given to the API server.
	ServiceCIDR = "10.213.128.0/20"
	// KubernetesServiceIP is the ClusterIP of default/kubernetes (first address of ServiceCIDR).
	KubernetesServiceIP = "10.213.128.1"
	// DNSServiceIP is the ClusterIP of kube-system/kube-dns.
	DNSServiceIP = "10.213.128.10"

	envInNetns = "KNR_HARNESS_NETNS"
)

// Main is TestMain for packages that use the harness: it re-executes the test
// binary inside a private network namespace, then runs the tests.
func Main(m *testing.M) {
	if err := EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// EnterNetworkNamespace makes sure the calling process runs in a private
// network namespace set up for the simulated cluster. On the first call it
// replaces the process with itself under `unshare --net` (and so never
// returns); in the re-executed process it configures the namespace.
func EnterNetworkNamespace() error {
	if os.Getenv(envInNetns) != "1" {
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			return fmt.Errorf("unshare (util-linux) not found: it is needed to give the simulated cluster its own network namespace: %w", err)
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("locate own executable: %w", err)
		}
		args := []string{"unshare", "--net"}
		if os.Geteuid() != 0 {
			// Unprivileged: a user namespace where we are root gives us the network namespace.
			args = append(args, "--map-root-user")
		}
		args = append(args, "--", self)
		args = append(args, os.Args[1:]...)
		env := append(os.Environ(), envInNetns+"=1")
		if err := syscall.Exec(unshare, args, env); err != nil {
			return fmt.Errorf("exec %s: %w", unshare, err)
		}
	}
	return setupNamespace()
}

func setupNamespace() error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("ip (iproute2) not found; run `make tools`: %w", err)
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "replace", "local", ClusterNet, "dev", "lo"},
	} {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	// Prove the namespace is what we think: no way out, and the cluster range is local.
	if out, err := exec.Command(ip, "route", "show", "default").CombinedOutput(); err != nil || len(out) != 0 {
		return fmt.Errorf("refusing to run: the test network namespace has a default route (%q, %v)", out, err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(APIServerIP, "0"))
	if err != nil {
		return fmt.Errorf("network namespace not usable: listen on %s: %w", APIServerIP, err)
	}
	return l.Close()
}

// MainWithControlPlane is TestMain for packages whose tests share one control
// plane: it enters the network namespace, starts the plane with opts, runs
// setup (which typically stores the plane in a package variable) within
// setupTimeout of its own, runs the tests, prints the component logs if they
// failed, stops the plane and exits.
func MainWithControlPlane(m *testing.M, opts Options, setup func(context.Context, *ControlPlane) error) {
	mainWith(m, "control plane", planeStartTimeout, func(ctx context.Context) (environment, error) {
		cp, err := Start(ctx, opts)
		if err != nil {
			return nil, err
		}
		sctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		return cp, setup(sctx, cp)
	})
}

// planeStartTimeout bounds a control plane's start (etcd, kube-apiserver,
// CoreDNS: each gets startBudget). At load 40 on two 2.1-GHz EPYC cores
// kube-apiserver alone took more than the minute the whole start had
// (test/e2e/cleanup in a warm make test). It only bounds a hang: a component
// that fails exits and ends the start at once.
const planeStartTimeout = 3 * time.Minute

// setupTimeout bounds MainWithControlPlane's setup, apart from the plane's
// start: on a busy machine a slow start (14 s at load 20) once left CRD
// installs too little of a shared minute, and at load 25 installing
// prometheus-operator's and cert-manager's CRDs alone took over a minute
// (test/e2e/kustomize in a cold make test). It only bounds a hang.
const setupTimeout = 3 * time.Minute

// MainWithCluster is MainWithControlPlane for packages whose tests share
// one cluster of real nodes (StartCluster with opts); setup runs once the
// cluster is up, for what every test needs on it (cert-manager, say).
func MainWithCluster(m *testing.M, opts ClusterOptions, setup func(context.Context, *Cluster) error) {
	if err := opts.awaitLaterTools(); err != nil {
		fmt.Fprintln(os.Stderr, "harness: start cluster:", err)
		os.Exit(1)
	}
	mainWith(m, "cluster", clusterSetupTimeout, func(ctx context.Context) (environment, error) {
		c, err := StartCluster(ctx, opts)
		if err != nil {
			return nil, err
		}
		return c, setup(ctx, c)
	})
}

// clusterSetupTimeout bounds starting a cluster of real nodes and the
// setup of MainWithCluster: another process's real nodes may have to stop
// first (one set of real nodes runs on a machine at a time), then minutes on
// a busy machine for several nodes and a deployment such as cert-manager's.
const clusterSetupTimeout = 10 * time.Minute

// environment is what the Main functions start: a control plane or a cluster.
type environment interface {
	Logs(n int) string
	Stop()
}

// mainWith enters the network namespace, brings the environment up with
// up (within timeout), runs the tests, prints the components' logs if
// anything failed, stops it and exits. up returns the environment it
// started also with an error of its setup, so that it is stopped.
func mainWith(m *testing.M, what string, timeout time.Duration, up func(context.Context) (environment, error)) {
	if err := EnterNetworkNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	env, err := up(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "harness: start %s: %v\n", what, err)
		if env != nil {
			fmt.Fprintf(os.Stderr, "%s logs:\n%s", what, env.Logs(40))
			env.Stop()
		}
		os.Exit(1)
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "%s logs:\n%s", what, env.Logs(40))
	}
	env.Stop()
	os.Exit(code)
}
