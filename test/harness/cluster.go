package harness

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
)

// A cluster of real nodes: the control plane plus kube-controller-manager and
// kube-scheduler, and nodes that each run containerd, the kubelet and
// kube-proxy in network, mount and PID namespaces of their own.
//
// Addresses: the harness namespace (where the control plane and the tests
// run) reaches real node i over a veth pair, 10.214.i.1 on its side and
// 10.214.i.2 (the node's InternalIP) on the node's; kube-controller-manager
// gives each node a /24 of PodCIDR, routed from the harness namespace to the
// node. In IPv6 (Options.IPFamilies) the same holds with fd00:10:214:i::1
// and ::2 and a /64 of PodCIDR6, in dual-stack both. Nothing is routed to
// the host's own network.
const (
	// PodCIDR is the cluster's pod address range.
	PodCIDR = "10.244.0.0/16"
	// realNodeNet is the range of the real nodes' veth links.
	realNodeNet = "10.214.%d.%d"
	// maxRealNodes bounds the nodes of one cluster (one /24 link each).
	maxRealNodes = 64
	// CoreDNSImage is the image the harness builds from the pinned CoreDNS
	// (bin/images/coredns.tar) and runs as the kube-system/coredns Deployment.
	coreDNSTar = "coredns.tar"
	pauseTar   = "pause.tar"
)

// ClusterOptions shapes a cluster of real nodes.
type ClusterOptions struct {
	// Options configures the control plane (NoDNS is ignored: CoreDNS runs
	// as a Deployment on the real nodes).
	Options
	// Nodes is how many real nodes start with the cluster (default 2).
	Nodes int
	// ProjectImages imports the agent and webhook images `make images` wrote
	// (bin/images) into every real node's containerd.
	ProjectImages bool
	// Images are further OCI image tarballs imported into every real node,
	// besides the pause and CoreDNS images.
	Images []string
	// CoreDNSReplicas is the size of the CoreDNS Deployment (default 2).
	CoreDNSReplicas int32
	// NodeTaints are what the initial real nodes register with
	// (--register-with-taints); nil means StartupTaint alone. The upgrade
	// test starts from a release that wrote another key.
	NodeTaints []corev1.Taint
	// NodeMonitorGracePeriod is how long kube-controller-manager's node
	// lifecycle controller waits for a node's heartbeat before it marks the
	// node's Ready condition Unknown and taints it node.kubernetes.io/unreachable;
	// zero keeps its default (50 s). Fault tests shorten it.
	NodeMonitorGracePeriod time.Duration
	// KubeletDefaultTimings leaves the kubelets' status and sync timings at
	// the kubelet's defaults (status checked every 10 s and posted when it
	// changes or every 5 minutes, pods synced every minute), as on a
	// production node, instead of the harness's 2 s status posts and 10 s
	// syncs: for measuring what a node costs the API server.
	KubeletDefaultTimings bool
	// NetworkPolicies runs SIG Network's reference NetworkPolicy enforcer
	// (kube-network-policies) on every real node, so NetworkPolicies are
	// enforced for real (netpol.go).
	NetworkPolicies bool
}

// Cluster is a control plane with real nodes.
type Cluster struct {
	*ControlPlane
	// Nodes are the real nodes, in the order they were added.
	Nodes []*RealNode

	opts     ClusterOptions
	pki      *clusterPKI
	cgroupID string
	nextReal int
}

// clusterPKI is the client CA of a cluster and the static tokens of its
// controllers: kubelets authenticate with certificates (as
// system:node:<name>), the controllers and kube-proxy with tokens.
type clusterPKI struct {
	dir    string
	ca     certs.KeyPair
	tokens map[string]string // user -> token
}

func newClusterPKI(dir string) (*clusterPKI, error) {
	ca, err := certs.NewCA("kube-node-ready-harness-ca", time.Now(), 24*time.Hour)
	if err != nil {
		return nil, err
	}
	p := &clusterPKI{dir: dir, ca: ca, tokens: map[string]string{}}
	for _, user := range []string{"system:kube-controller-manager", "system:kube-scheduler", "system:kube-proxy"} {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		p.tokens[user] = hex.EncodeToString(b)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return p, os.WriteFile(p.caFile(), ca.CertPEM, 0o644)
}

func (p *clusterPKI) caFile() string    { return filepath.Join(p.dir, "client-ca.crt") }
func (p *clusterPKI) caKeyFile() string { return filepath.Join(p.dir, "client-ca.key") }

func (p *clusterPKI) tokenLines() string {
	var b strings.Builder
	for user, token := range p.tokens {
		fmt.Fprintf(&b, "%s,%s,%s\n", token, user, user)
	}
	return b.String()
}

// apiServerArgs are the flags a real cluster adds: client certificates,
// the Node authorizer and NodeRestriction for kubelets, a client certificate
// for calling kubelets (logs, exec), and endpoint routing so webhooks are
// called at their pod IPs (the harness namespace runs no kube-proxy).
func (p *clusterPKI) apiServerArgs(certDir string) ([]string, error) {
	if err := os.WriteFile(p.caKeyFile(), p.ca.KeyPEM, 0o600); err != nil {
		return nil, err
	}
	certFile, keyFile, err := p.issue(certDir, "kubelet-client", "kube-apiserver-kubelet-client", nil)
	if err != nil {
		return nil, err
	}
	return []string{
		"--client-ca-file=" + p.caFile(),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--kubelet-client-certificate=" + certFile,
		"--kubelet-client-key=" + keyFile,
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--enable-aggregator-routing=true",
	}, nil
}

// issue writes a client certificate for user (groups as organizations)
// signed by the cluster CA into dir and returns the file names.
func (p *clusterPKI) issue(dir, name, user string, groups []string) (certFile, keyFile string, err error) {
	ca, err := tls.X509KeyPair(p.ca.CertPEM, p.ca.KeyPEM)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     ca.Leaf.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Leaf, &key.PublicKey, ca.PrivateKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
}

// kubeconfig writes a kubeconfig for the API server at path, authenticating
// with a client certificate or a token.
func (cp *ControlPlane) kubeconfig(path, certFile, keyFile, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["harness"] = &clientcmdapi.Cluster{Server: cp.Config.Host, CertificateAuthority: cp.CAFile}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile, Token: token}
	cfg.Contexts["harness"] = &clientcmdapi.Context{Cluster: "harness", AuthInfo: "user"}
	cfg.CurrentContext = "harness"
	return clientcmd.WriteToFile(*cfg, path)
}

// awaitLaterTools waits for the later tools o needs while make test still
// builds them (LaterTool), before a start's deadline begins and before a
// real-node slot is taken: a cold make test's wait (ten minutes) once ran
// out a start's whole budget, holding a slot the other streams waited for.
func (o ClusterOptions) awaitLaterTools() error {
	if !o.NetworkPolicies {
		return nil
	}
	bin, err := resolveBinDir(o.BinDir)
	if err != nil {
		return err
	}
	_, err = LaterTool(context.Background(), bin, "kube-network-policies")
	return err
}

// StartCluster brings up a control plane with kube-controller-manager and
// kube-scheduler, opts.Nodes real nodes (default 2) and CoreDNS as a
// Deployment on them, and waits until every node is Ready and CoreDNS
// answers. It must run inside the harness network namespace, as root.
func StartCluster(ctx context.Context, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.CoreDNSReplicas == 0 {
		opts.CoreDNSReplicas = 2
	}
	if opts.Nodes > maxRealNodes {
		return nil, fmt.Errorf("at most %d real nodes", maxRealNodes)
	}
	families, err := familyAddresses(opts.IPFamilies)
	if err != nil {
		return nil, err
	}
	if err := checkRealNodeHost(hasIPv6(families)); err != nil {
		return nil, err
	}
	if err := opts.awaitLaterTools(); err != nil {
		return nil, err
	}
	start := time.Now()
	dir, ownDir := opts.Dir, opts.Dir == ""
	if ownDir {
		if dir, err = os.MkdirTemp("", "knr-cluster-"); err != nil {
			return nil, err
		}
		opts.Dir = dir
	}
	pki, err := newClusterPKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	unlock, err := lockRealNodes(ctx, opts.Logf)
	if err != nil {
		return nil, err
	}
	opts.Options.cluster = pki
	cp, err := Start(ctx, opts.Options)
	if err != nil {
		unlock()
		return nil, err
	}
	cp.addOnStop(unlock) // first added, so run last
	cp.ownDir = ownDir
	c := &Cluster{ControlPlane: cp, opts: opts, pki: pki}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, cp.Logs(30))
			cp.Stop()
		}
	}()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	c.cgroupID = "knr-" + hex.EncodeToString(b)
	if err = setHarnessForwarding(families); err != nil {
		return nil, err
	}
	if err = c.startControllers(); err != nil {
		return nil, err
	}
	errs := make(chan error, opts.Nodes)
	for i := 0; i < opts.Nodes; i++ {
		go func() {
			_, err := c.AddNode(ctx, RealNodeOptions{Taints: opts.NodeTaints})
			errs <- err
		}()
	}
	for i := 0; i < opts.Nodes; i++ {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return nil, err
	}
	if err = c.deployCoreDNS(ctx); err != nil {
		return nil, err
	}
	cp.logf("cluster with %d real nodes up in %s (dir %s)", opts.Nodes, time.Since(start).Round(time.Millisecond), cp.Dir)
	return c, nil
}

// realNodeLocks are the host-wide slots of clusters of real nodes: a
// process holds one (flock) while its cluster is up. make e2e runs the
// real-node packages in four streams with four slots; the slots keep more
// clusters of kubelets than that from sharing the host's cores, inotify
// instances and cgroups even if packages are started outside those
// streams. Their tests mostly wait (on agents' rounds, gate timeouts,
// garbage collection), so the cores stay idle most of the time.
const (
	realNodeLocks     = "/run/knr-real-nodes.%d.lock"
	realNodeSlotsEnv  = "KNR_REAL_NODE_CLUSTERS"
	realNodeSlotsDflt = 2
)

// inotifyPerCluster is the share of the host's inotify instances
// (fs.inotify.max_user_instances, one count for all of root's processes)
// a cluster of real nodes may take: about 9 per node (kubelet 6, containerd
// 2, kube-proxy 1) and 8 for the control plane, 53 for the most nodes any
// test runs at once (test/e2e/install, 5). A kubelet that finds none left
// fails to start.
const inotifyPerCluster = 64

// checkInotify fails when slots clusters of real nodes could run out of
// the host's inotify instances, naming the fix.
func checkInotify(slots int) error {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return fmt.Errorf("real nodes: read the host's inotify limit: %w", err)
	}
	have, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("real nodes: fs.inotify.max_user_instances %q: %w", b, err)
	}
	return inotifyEnough(slots, have)
}

// inotifyEnough fails when have inotify instances are fewer than slots
// clusters of real nodes may take.
func inotifyEnough(slots, have int) error {
	if want := slots * inotifyPerCluster; have < want {
		return fmt.Errorf("%d clusters of real nodes at once (%s) need %d inotify instances and the host allows %d: "+
			"sysctl -w fs.inotify.max_user_instances=%d (make e2e does), or set %s lower", slots, realNodeSlotsEnv, want, have, want, realNodeSlotsEnv)
	}
	return nil
}

// lockRealNodes waits until a slot for a cluster of real nodes is free
// (KNR_REAL_NODE_CLUSTERS of them, default 2), then takes it; the returned
// function releases it.
func lockRealNodes(ctx context.Context, logf func(string, ...any)) (func(), error) {
	slots := realNodeSlotsDflt
	if v := os.Getenv(realNodeSlotsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s=%q: want a whole number of clusters, 1 or more", realNodeSlotsEnv, v)
		}
		slots = n
	}
	if err := checkInotify(slots); err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for i := range slots {
		f, err := os.OpenFile(fmt.Sprintf(realNodeLocks, i), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("real-node lock: %w", err)
		}
		files = append(files, f)
	}
	for waited := false; ; waited = true {
		for i, f := range files {
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
				files = slices.Delete(files, i, i+1)
				closeAll()
				return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
			}
		}
		if !waited && logf != nil {
			logf("waiting for one of %d clusters of real nodes on this host to stop (%s)", slots, fmt.Sprintf(realNodeLocks, 0))
		}
		select {
		case <-ctx.Done():
			closeAll()
			return nil, fmt.Errorf("all %d real-node locks (%s...) held by other processes: %w", slots, fmt.Sprintf(realNodeLocks, 0), ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// StartClusterT is StartCluster for a test: it fails the test if the cluster
// does not come up and removes it when the test ends, printing the
// components' logs if the test failed.
func StartClusterT(t testing.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	if err := opts.awaitLaterTools(); err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	// The budget of MainWithCluster: it includes waiting for another
	// process's real nodes to stop, which can take minutes on a shared machine.
	ctx, cancel := context.WithTimeout(context.Background(), clusterSetupTimeout)
	defer cancel()
	c, err := StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", c.Logs(40))
		}
		c.Stop()
	})
	return c
}

// checkRealNodeHost names what a real node needs from the host that is
// missing, with what to do about it.
func checkRealNodeHost(ipv6 bool) error {
	if os.Geteuid() != 0 {
		return errors.New("real nodes need root (namespaces, cgroups, mounts): run the tests as root")
	}
	var missing []string
	bins := []string{"nsenter", "ip", "iptables", "conntrack", "runc", "mount"}
	if ipv6 {
		bins = append(bins, "ip6tables") // kube-proxy's IPv6 rules
	}
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			missing = append(missing, cniBinDir+"/"+plugin)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("real nodes need %s: run `make tools` (it installs runc, containernetworking-plugins, iptables, conntrack and util-linux with apt-get)", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 != nil {
			return fmt.Errorf("real nodes need a cgroup file system at /sys/fs/cgroup (v1 memory controller or v2): %v", err)
		}
	}
	if _, err := os.Stat("/proc/sys/net/bridge/bridge-nf-call-iptables"); err != nil {
		return errors.New("real nodes need the kernel's br_netfilter (modprobe br_netfilter) so Services work for pods on one bridge")
	}
	return nil
}

// setHarnessForwarding lets the harness namespace route between real
// nodes, in every family of the cluster.
func setHarnessForwarding(families []Addresses) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return err
	}
	if hasIPv6(families) {
		return os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644)
	}
	return nil
}

func (c *Cluster) startControllers() error {
	cp := c.ControlPlane
	dir := filepath.Join(cp.Dir, "controllers")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	kcmConfig := filepath.Join(dir, "kube-controller-manager.kubeconfig")
	schedConfig := filepath.Join(dir, "kube-scheduler.kubeconfig")
	if err := cp.kubeconfig(kcmConfig, "", "", c.pki.tokens["system:kube-controller-manager"]); err != nil {
		return err
	}
	if err := cp.kubeconfig(schedConfig, "", "", c.pki.tokens["system:kube-scheduler"]); err != nil {
		return err
	}
	apiDir := filepath.Join(cp.Dir, "apiserver")
	kcmArgs := []string{
		"--kubeconfig=" + kcmConfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file=" + filepath.Join(apiDir, "sa.key"),
		"--root-ca-file=" + cp.CAFile,
		"--cluster-signing-cert-file=" + c.pki.caFile(),
		"--cluster-signing-key-file=" + c.pki.caKeyFile(),
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + joinField(cp.Families, func(a Addresses) string { return a.PodCIDR }),
		"--service-cluster-ip-range=" + joinField(cp.Families, func(a Addresses) string { return a.ServiceCIDR }),
		"--v=1",
	}
	kcmArgs = append(kcmArgs, nodeCIDRMaskArgs(cp.Families)...)
	if g := c.opts.NodeMonitorGracePeriod; g > 0 {
		kcmArgs = append(kcmArgs, "--node-monitor-grace-period="+g.String(), "--node-monitor-period=1s")
	}
	kcm, err := StartProcess(cp.Dir, "kube-controller-manager", filepath.Join(cp.BinDir, "kube-controller-manager"), kcmArgs, nil)
	if err != nil {
		return err
	}
	cp.addExtra(kcm)
	if err := cp.startScheduler(schedConfig); err != nil {
		return err
	}
	// The API server calls kubelets (logs, exec) as this user.
	_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), kubeletAPIBinding(), metav1.CreateOptions{})
	return err
}

// StartScheduler runs kube-scheduler against a control plane without real
// nodes (as its admin), for tests whose pods must be scheduled onto
// simulated or KWOK Nodes: Karpenter, for one, acts only on the pods the
// scheduler has marked unschedulable. It is stopped with the plane.
func (cp *ControlPlane) StartScheduler() error {
	return cp.startScheduler(cp.Kubeconfig)
}

// startScheduler runs kube-scheduler with kubeconfig, no serving port and no
// leader election.
func (cp *ControlPlane) startScheduler(kubeconfig string) error {
	sched, err := StartProcess(cp.Dir, "kube-scheduler", filepath.Join(cp.BinDir, "kube-scheduler"), []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	cp.addExtra(sched)
	return nil
}

func (cp *ControlPlane) addExtra(p *Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.extra = append(cp.extra, p)
}

func (cp *ControlPlane) addOnStop(f func()) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.onStop = append(cp.onStop, f)
}
