package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// RealNode is a node run by a real kubelet, containerd and kube-proxy in
// network, mount and PID namespaces of its own.
type RealNode struct {
	// Name is the Node object's name (the kubelet's --hostname-override).
	Name string
	// IP is the node's InternalIP (in the primary family).
	IP string
	// IPs are its InternalIPs in every family of the cluster, primary first.
	IPs []string
	// PodCIDR is the pod range kube-controller-manager gave the node (in
	// the primary family).
	PodCIDR string
	// PodCIDRs are its pod ranges in every family, primary first.
	PodCIDRs []string
	// Dir holds the node's configuration, state and logs.
	Dir string

	index      int
	hostLink   string
	taints     []corev1.Taint // registered by the kubelet, again by a restarted one
	cluster    *Cluster
	init       *Process
	containerd *Process
	kubelet    *Process
	kubeProxy  *Process
}

// RealNodeOptions shapes a real node.
type RealNodeOptions struct {
	// Name defaults to real-<n>.
	Name string
	// Taints are registered by the kubelet (--register-with-taints); nil
	// means the startup taint alone. An empty non-nil slice means none.
	Taints []corev1.Taint
	// NoWait returns once the kubelet runs, without waiting for Ready.
	NoWait bool
}

// AddNode starts a real node: it sets up its namespaces and link, imports
// the cluster's images into its containerd, starts the kubelet (which
// registers the Node with the startup taint) and kube-proxy, gives the node
// its CNI configuration once kube-controller-manager has assigned its pod
// range, and waits until the node is Ready.
func (c *Cluster) AddNode(ctx context.Context, opts RealNodeOptions) (*RealNode, error) {
	c.mu.Lock()
	c.nextReal++
	i := c.nextReal
	c.mu.Unlock()
	if i > maxRealNodes {
		return nil, fmt.Errorf("at most %d real nodes", maxRealNodes)
	}
	n := &RealNode{
		Name:     opts.Name,
		index:    i,
		hostLink: fmt.Sprintf("knr-n%d", i),
		cluster:  c,
	}
	for _, a := range c.Families {
		n.IPs = append(n.IPs, nodeLinkAddress(a.Family, i, 2))
	}
	n.IP = n.IPs[0]
	if n.Name == "" {
		n.Name = fmt.Sprintf("real-%d", i)
	}
	n.Dir = filepath.Join(c.Dir, "nodes", n.Name)
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := n.startNamespaces(ctx); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startRuntime(ctx); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	taints := opts.Taints
	if taints == nil {
		taints = []corev1.Taint{StartupTaint}
	}
	n.taints = taints
	if err := n.startKubelet(taints); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.configurePodNetwork(ctx); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	if c.opts.NetworkPolicies {
		if err := n.startNetworkPolicies(ctx); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	c.mu.Lock()
	c.Nodes = append(c.Nodes, n)
	c.mu.Unlock()
	if !opts.NoWait {
		if err := n.WaitReady(ctx); err != nil {
			return nil, err
		}
	}
	c.logf("real node %s (%s, pods %s) up in %s", n.Name, strings.Join(n.IPs, ","), strings.Join(n.PodCIDRs, ","), time.Since(start).Round(time.Millisecond))
	return n, nil
}

// nodeInit runs as PID 1 of a node's PID namespace, in its fresh mount
// namespace: it makes every mount private, gives the node its own /proc, /run,
// /var/lib and /var/log (the latter two kept in the node's directory, so pod
// logs and kubelet state stay off the host), and a boot ID of its own, new at
// every boot (Start) as a machine's is, where the kubelet reads it for
// status.nodeInfo.bootID (the nodes share the host's kernel, whose boot ID
// never changes); then it becomes the pause program, which reaps orphans and
// exits on SIGTERM; the kernel then kills everything else in the namespace.
const nodeInit = `set -eu
mount --make-rprivate /
mount -t proc proc /proc
cat /proc/sys/kernel/random/uuid > "$STATE/boot_id"
mount --bind "$STATE/boot_id" /proc/sys/kernel/random/boot_id
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p "$STATE/var-lib/kubelet" "$STATE/var-log"
mount --bind "$STATE/var-lib" /var/lib
mount --bind "$STATE/var-log" /var/log
mount --bind /var/lib/kubelet /var/lib/kubelet
mount --make-rshared /var/lib/kubelet
mkdir -p /run/containerd
touch "$STATE/ready"
exec "$PAUSE"
`

func (n *RealNode) startNamespaces(ctx context.Context) error {
	cp := n.cluster.ControlPlane
	ready := filepath.Join(n.Dir, "ready")
	_ = os.Remove(ready)
	p, err := startProcess(n.Dir, "init", "/bin/sh", []string{"-c", nodeInit},
		[]string{"STATE=" + n.Dir, "PAUSE=" + filepath.Join(cp.BinDir, "pause")},
		syscall.CLONE_NEWNET|syscall.CLONE_NEWNS|syscall.CLONE_NEWPID)
	if err != nil {
		return err
	}
	p.Name = n.Name + "/init"
	n.init = p
	cp.addExtra(p)
	cgroupID := n.cgroupRoot()
	cp.addOnStop(func() { removeCgroups(cgroupID) })
	if err := createCgroups(cgroupID); err != nil {
		return err
	}
	err = waitFor(ctx, p, startBudget, func() (bool, error) {
		_, err := os.Stat(ready)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("node namespaces: %w", err)
	}
	return n.configureLink(ctx, p.Pid())
}

// cgroupRoot is the node's own cgroup subtree; removing it is the whole
// cgroup teardown.
func (n *RealNode) cgroupRoot() string { return n.cluster.cgroupID + "-" + n.Name }

// enter starts bin inside the node's namespaces as a component of the node.
func (n *RealNode) enter(name, bin string, args []string, env []string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: binary %s not found (run `make tools`): %w", name, bin, err)
	}
	nsArgs := append([]string{"--target", strconv.Itoa(n.init.Pid()), "--net", "--mount", "--pid", "--wd=/", "--", bin}, args...)
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return nil, err
	}
	p, err := StartProcess(n.Dir, name, nsenter, nsArgs, env)
	if err != nil {
		return nil, err
	}
	p.Name = n.Name + "/" + name
	n.cluster.addExtra(p)
	return p, nil
}

// run runs a command inside the node's namespaces and returns its output.
func (n *RealNode) run(ctx context.Context, bin string, args ...string) (string, error) {
	nsArgs := append([]string{"--target", strconv.Itoa(n.init.Pid()), "--net", "--mount", "--pid", "--wd=/", "--", bin}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", nsArgs...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s on %s: %v: %s", filepath.Base(bin), strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

func (n *RealNode) startRuntime(ctx context.Context) error {
	cp := n.cluster.ControlPlane
	cniConf := filepath.Join(n.Dir, "cni")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.1"
[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # This machine's bounding set lacks CAP_SYS_RESOURCE: without this every
  # sandbox fails to lower its oom_score_adj.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%q]
    conf_dir = %q
`, cniBinDir, cniConf)
	configFile := filepath.Join(n.Dir, "containerd.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	path := "PATH=" + cp.BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	p, err := n.enter("containerd", filepath.Join(cp.BinDir, "containerd"), []string{"--config", configFile, "--log-level", "warn"}, []string{path})
	if err != nil {
		return err
	}
	n.containerd = p
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	ctr := filepath.Join(cp.BinDir, "ctr")
	images := []string{filepath.Join(cp.BinDir, "images", pauseTar), filepath.Join(cp.BinDir, "images", coreDNSTar)}
	if n.cluster.opts.ProjectImages {
		images = append(images, filepath.Join(cp.BinDir, "images", "kube-node-ready-agent.tar"), filepath.Join(cp.BinDir, "images", "kube-node-ready-webhook.tar"))
	}
	images = append(images, n.cluster.opts.Images...)
	for _, img := range images {
		if _, err := n.run(ctx, ctr, "--address", "/run/containerd/containerd.sock", "--namespace", "k8s.io", "images", "import", img); err != nil {
			return fmt.Errorf("import image %s: %w", img, err)
		}
	}
	return nil
}

func (n *RealNode) startKubelet(taints []corev1.Taint) error {
	c := n.cluster
	cp := c.ControlPlane
	certFile, keyFile, err := c.pki.issue(n.Dir, "kubelet", "system:node:"+n.Name, []string{"system:nodes"})
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := cp.kubeconfig(kubeconfig, certFile, keyFile, ""); err != nil {
		return err
	}
	resolv := filepath.Join(n.Dir, "resolv.conf")
	var nameservers strings.Builder
	for _, a := range c.Families {
		fmt.Fprintf(&nameservers, "nameserver %s\n", a.DNSServiceIP)
	}
	if err := os.WriteFile(resolv, []byte(nameservers.String()), 0o644); err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /%[3]s
# The host has cgroup v1, which kubelets from 1.35 refuse by default.
failCgroupV1: false
failSwapOn: false
clusterDNS: [%[4]s]
clusterDomain: cluster.local
resolvConf: %[5]q
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
volumeStatsAggPeriod: 0s
maxPods: 50
`, n.IP, c.pki.caFile(), n.cgroupRoot(), joinField(c.Families, func(a Addresses) string { return a.DNSServiceIP }), resolv)
	if !c.opts.KubeletDefaultTimings {
		// Status posted every 2 s (nodeStatusReportFrequency follows
		// nodeStatusUpdateFrequency when only that is set) and pods synced
		// every 10 s: tests see a node's changes sooner.
		config += "nodeStatusUpdateFrequency: 2s\nsyncFrequency: 10s\nfileCheckFrequency: 5s\n"
	}
	configFile := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	var ts []string
	for _, t := range taints {
		ts = append(ts, fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect))
	}
	args := []string{
		"--config=" + configFile,
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + n.Name,
		"--node-ip=" + strings.Join(n.IPs, ","),
		"--v=1",
	}
	if len(ts) > 0 {
		args = append(args, "--register-with-taints="+strings.Join(ts, ","))
	}
	path := "PATH=" + cp.BinDir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if n.kubelet, err = n.enter("kubelet", filepath.Join(cp.BinDir, "kubelet"), args, []string{path}); err != nil {
		return err
	}

	proxyConfig := filepath.Join(n.Dir, "kube-proxy.kubeconfig")
	if err := cp.kubeconfig(proxyConfig, "", "", c.pki.tokens["system:kube-proxy"]); err != nil {
		return err
	}
	// Zero conntrack settings leave the (host-wide) conntrack sysctls alone.
	// kube-proxy runs in iptables mode for each family the node has an
	// address in (ip6tables for IPv6), as it finds them on the Node.
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %q}
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: %s
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, proxyConfig, joinField(c.Families, func(a Addresses) string { return a.PodCIDR }), n.Name, n.IP)
	proxyFile := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyFile, []byte(proxy), 0o644); err != nil {
		return err
	}
	n.kubeProxy, err = n.enter("kube-proxy", filepath.Join(cp.BinDir, "kube-proxy"), []string{"--config=" + proxyFile, "--v=1"}, []string{path})
	return err
}

// WaitReady waits until the node reports Ready.
func (n *RealNode) WaitReady(ctx context.Context) error {
	err := n.waitNode(ctx, 90*time.Second, func(node *corev1.Node) bool {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready: %w", n.Name, err)
	}
	return nil
}

// waitNode polls the node's Node object until cond holds of it, the timeout
// passes or the node's kubelet exits.
func (n *RealNode) waitNode(ctx context.Context, timeout time.Duration, cond func(*corev1.Node) bool) error {
	return waitFor(ctx, n.kubelet, timeout, func() (bool, error) {
		node, err := n.cluster.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil && cond(node), nil
	})
}

// CutPodNetwork makes the node's pods unreachable from everywhere else (the
// node itself, its kubelet and its link stay up); RestorePodNetwork undoes it.
func (n *RealNode) CutPodNetwork(ctx context.Context) error { return n.routePods(ctx, false) }

// RestorePodNetwork routes the node's pod range to it again.
func (n *RealNode) RestorePodNetwork(ctx context.Context) error { return n.routePods(ctx, true) }

// CutOff takes the node's link down: it can reach nothing and nothing can
// reach it or its pods, as a node whose network failed. Reconnect undoes it.
func (n *RealNode) CutOff(ctx context.Context) error { return n.setLink(ctx, "down") }

// Reconnect brings a cut-off node's link back up.
func (n *RealNode) Reconnect(ctx context.Context) error {
	if err := n.setLink(ctx, "up"); err != nil {
		return err
	}
	return n.routePods(ctx, true)
}

func (n *RealNode) setLink(ctx context.Context, state string) error {
	if out, err := exec.CommandContext(ctx, "ip", "link", "set", n.hostLink, state).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link set %s %s: %v: %s", n.hostLink, state, err, out)
	}
	return nil
}

// Stop stops the node as a machine that is switched off: its kubelet,
// kube-proxy, containerd and every container end, and its link goes away.
// The Node object stays, as it would.
func (n *RealNode) Stop() error {
	var errs []error
	for _, p := range []*Process{n.kubelet, n.kubeProxy, n.containerd, n.init} {
		if p != nil {
			errs = append(errs, p.Stop(10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// Exec runs a command inside the node's namespaces (as a person on the node
// would) and returns its combined output.
func (n *RealNode) Exec(ctx context.Context, name string, args ...string) (string, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		if bin = filepath.Join(n.cluster.BinDir, name); !fileExists(bin) {
			return "", err
		}
	}
	return n.run(ctx, bin, args...)
}

// ImageFiles lists the files at path (such as /kube-node-ready-agent) in
// every image layer unpacked on this node, to reach their page cache.
func (n *RealNode) ImageFiles(path string) ([]string, error) {
	// The node's /var/lib is its Dir's var-lib (see startNamespaces).
	return filepath.Glob(filepath.Join(n.Dir, "var-lib", "containerd", "io.containerd.snapshotter.v1.overlayfs", "snapshots", "*", "fs", path))
}

// ContainerCgroup is the memory cgroup directory of a container (its ID as
// in the pod's status) of the pod with podUID on this node, for reading the
// container's memory use.
func (n *RealNode) ContainerCgroup(podUID, containerID string) (string, error) {
	id := strings.TrimPrefix(containerID, "containerd://")
	var found string
	root := filepath.Join("/sys/fs/cgroup/memory", n.cgroupRoot())
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || found != "" {
			return nil
		}
		if d.IsDir() && filepath.Base(p) == id && strings.Contains(p, "pod"+podUID) {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	if found == "" {
		return "", fmt.Errorf("no memory cgroup for container %s of pod %s under %s", id, podUID, root)
	}
	return found, nil
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// createCgroups creates the node's cgroup root in every hierarchy, as the
// kubelet requires of its cgroupRoot.
func createCgroups(name string) error {
	if fileExists("/sys/fs/cgroup/cgroup.controllers") {
		if err := os.Mkdir("/sys/fs/cgroup/"+name, 0o755); err != nil && !os.IsExist(err) {
			return err
		}
		return nil
	}
	hierarchies, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		if !h.IsDir() {
			continue // cpu,cpuacct style links point at a directory listed too
		}
		if err := os.Mkdir(filepath.Join("/sys/fs/cgroup", h.Name(), name), 0o755); err != nil && !os.IsExist(err) {
			return fmt.Errorf("create cgroup %s: %w", name, err)
		}
	}
	return nil
}

// removeCgroups removes a node's cgroup subtree from every hierarchy,
// deepest first, retrying while the killed processes leave it.
func removeCgroups(name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	if fileExists("/sys/fs/cgroup/" + name) {
		roots = append(roots, "/sys/fs/cgroup/"+name)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, root := range roots {
		for {
			var dirs []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			var failed error
			for i := len(dirs) - 1; i >= 0; i-- {
				if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
					failed = err
				}
			}
			if failed == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
