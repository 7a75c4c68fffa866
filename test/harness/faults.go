package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Faults of one real node, as they happen to machines: a component
// restarted or killed, the machine switched off and on, its path to the API
// server or its pod network cut. Each returns once the fault is in place
// (or, for a restart, once the component runs again); what the cluster
// makes of it is the test's to observe.

// RestartKubelet stops the node's kubelet (SIGTERM, as `systemctl restart
// kubelet` does) and starts it again with the same flags; it returns once
// the new kubelet runs (its Lease shows when it talks to the API server).
// Containers keep running: they belong to containerd's shims.
func (n *RealNode) RestartKubelet() error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	return n.StartKubelet()
}

// StopKubelet stops the node's kubelet (SIGTERM) and leaves it stopped: its
// connection to the API server and its watches end; containerd, kube-proxy
// and the containers keep running.
func (n *RealNode) StopKubelet() error {
	if err := n.kubelet.Stop(10 * time.Second); err != nil {
		return fmt.Errorf("node %s: stop kubelet: %w", n.Name, err)
	}
	return nil
}

// StartKubelet starts the kubelet StopKubelet stopped, with the same flags.
func (n *RealNode) StartKubelet() error {
	p, err := n.cluster.rerun(n.kubelet)
	if err != nil {
		return fmt.Errorf("node %s: start kubelet again: %w", n.Name, err)
	}
	n.kubelet = p
	return nil
}

// RestartContainerd kills containerd with SIGKILL (no shutdown of its own,
// as a crash or the OOM killer) and starts it again with the same
// configuration, returning once it answers. The shims, in process groups of
// their own, and so the containers, survive.
func (n *RealNode) RestartContainerd(ctx context.Context) error {
	old := n.containerd
	if err := old.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("node %s: kill containerd: %w", n.Name, err)
	}
	select {
	case <-old.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := n.cluster.rerun(old)
	if err != nil {
		return fmt.Errorf("node %s: start containerd again: %w", n.Name, err)
	}
	n.containerd = p
	if err := n.waitContainerd(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// waitContainerd waits until the node's containerd answers on its socket.
func (n *RealNode) waitContainerd(ctx context.Context) error {
	err := waitFor(ctx, n.containerd, startBudget, func() (bool, error) {
		_, err := n.ctr(ctx, "version")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("containerd not answering: %w", err)
	}
	return nil
}

// KillContainer sends SIGKILL to the main process of a container of this
// node (its ID as a pod's status gives it, containerd://<id>), as the
// kernel's OOM killer would; the kubelet then restarts it.
func (n *RealNode) KillContainer(ctx context.Context, containerID string) error {
	id := strings.TrimPrefix(containerID, "containerd://")
	_, err := n.ctr(ctx, "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", id)
	return err
}

// ctr runs containerd's ctr against the node's containerd.
func (n *RealNode) ctr(ctx context.Context, args ...string) (string, error) {
	bin := filepath.Join(n.cluster.BinDir, "ctr")
	return n.run(ctx, bin, append([]string{"--address", "/run/containerd/containerd.sock"}, args...)...)
}

// Start switches a stopped node on again (see Stop), as the same machine
// booting: new namespaces (so a fresh /run and a fresh network stack) but
// the same name, address, pod range, kubelet flags and disk state
// (/var/lib, so containerd's images and the kubelet's pods; the cgroups,
// in memory on a machine, are new), and waits
// until the node is Ready. Its Node object, kept while it was off, is the
// kubelet's again.
func (n *RealNode) Start(ctx context.Context) error {
	if exited, _ := n.init.Exited(); !exited {
		return fmt.Errorf("node %s is running: Stop it first", n.Name)
	}
	n.cluster.forget(n.init, n.containerd, n.kubelet, n.kubeProxy)
	// The old network namespace, and with it both ends of the node's link,
	// goes away after its last process; do not wait for the kernel.
	_ = exec.CommandContext(ctx, "ip", "link", "del", n.hostLink).Run()
	// A machine's cgroups do not survive a reboot. Left in place, the old
	// containers' cgroups keep the kubelet's cadvisor retrying them for
	// about 25 s before the kubelet syncs a pod.
	removeCgroups(n.cgroupRoot())
	if err := n.startNamespaces(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startRuntime(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.startKubelet(n.taints); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := n.configurePodNetwork(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return n.WaitReady(ctx)
}

// apiServerRule is the iptables rule (after the chain) that drops the
// node's packets to the API server's address in family a: from the node
// itself (kubelet, kube-proxy) in OUTPUT, from its pods (the kubernetes
// Service, translated to the API server's address on the node) in FORWARD.
func apiServerRule(chain string, a Addresses) []string {
	return []string{chain, "-d", a.APIServerIP, "-m", "comment", "--comment", "knr-fault: cut from the API server", "-j", "DROP"}
}

// iptablesFor is the iptables command of family: ip6tables for IPv6.
func iptablesFor(family corev1.IPFamily) string {
	if family == corev1.IPv6Protocol {
		return "ip6tables"
	}
	return "iptables"
}

// CutAPIServer drops every packet from the node and its pods to the API
// server (in every family), as a partition between a node and the control
// plane does: the node's connections hang rather than fail, and nothing else
// changes (its pods still reach each other and the other nodes').
// ReconnectAPIServer undoes it.
func (n *RealNode) CutAPIServer(ctx context.Context) error {
	for _, a := range n.cluster.Families {
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			if _, err := n.Exec(ctx, iptablesFor(a.Family), append([]string{"-w", "-I"}, apiServerRule(chain, a)...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReconnectAPIServer lets the node reach the API server again.
func (n *RealNode) ReconnectAPIServer(ctx context.Context) error {
	var errs []error
	for _, a := range n.cluster.Families {
		for _, chain := range []string{"OUTPUT", "FORWARD"} {
			_, err := n.Exec(ctx, iptablesFor(a.Family), append([]string{"-w", "-D"}, apiServerRule(chain, a)...)...)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// podRules are the iptables rules (after the chain) of the harness
// namespace, which routes between the nodes, that drop pod traffic between
// this node's pods and the pods of every other node, both ways, in family
// a (the node's pod range cidr of that family).
func (n *RealNode) podRules(a Addresses, cidr string) [][]string {
	comment := []string{"-m", "comment", "--comment", "knr-fault: pod network of " + n.Name}
	return [][]string{
		append([]string{"FORWARD", "-s", cidr, "-d", a.PodCIDR}, append(comment, "-j", "DROP")...),
		append([]string{"FORWARD", "-s", a.PodCIDR, "-d", cidr}, append(comment, "-j", "DROP")...),
	}
}

// PartitionPods cuts the pod network between this node's pods and every
// other node's (in every family), as a broken overlay does, while the node
// itself stays connected: the kubelet keeps the node Ready, and the node's
// pods still reach the API server. (CutPodNetwork, by contrast, makes the
// node's pods unreachable from everywhere, the API server included.)
// HealPods undoes it.
func (n *RealNode) PartitionPods(ctx context.Context) error {
	for i, a := range n.cluster.Families {
		for _, rule := range n.podRules(a, n.PodCIDRs[i]) {
			if err := iptables(ctx, a.Family, append([]string{"-w", "-I"}, rule...)); err != nil {
				return err
			}
		}
	}
	return nil
}

// HealPods joins the node's pods to the pod network again.
func (n *RealNode) HealPods(ctx context.Context) error {
	var errs []error
	for i, a := range n.cluster.Families {
		for _, rule := range n.podRules(a, n.PodCIDRs[i]) {
			errs = append(errs, iptables(ctx, a.Family, append([]string{"-w", "-D"}, rule...)))
		}
	}
	return errors.Join(errs...)
}

// dnsRules are the iptables rules (after the chain) of the harness
// namespace that drop the DNS queries (UDP and TCP port 53) of this node and
// its pods in family a, i: to the pods of other nodes (FORWARD) and to the
// harness namespace itself (INPUT). The node's pods are matched by their
// range and by the node's address, which their traffic may leave masqueraded.
func (n *RealNode) dnsRules(i int) [][]string {
	comment := []string{"-m", "comment", "--comment", "knr-fault: DNS of " + n.Name}
	var rules [][]string
	for _, chain := range []string{"FORWARD", "INPUT"} {
		for _, src := range []string{n.PodCIDRs[i], n.IPs[i]} {
			for _, proto := range []string{"udp", "tcp"} {
				rules = append(rules, append([]string{chain, "-s", src, "-p", proto, "--dport", "53"}, append(comment, "-j", "DROP")...))
			}
		}
	}
	return rules
}

// BreakDNS drops every DNS query of the node and its pods (in every
// family) where they leave it, in the harness namespace, so the fault
// outlives a reboot of the node (Stop, Start), as a broken resolver path of
// one machine does: the cluster's DNS answers every other node. FixDNS
// undoes it.
func (n *RealNode) BreakDNS(ctx context.Context) error {
	for i, a := range n.cluster.Families {
		for _, rule := range n.dnsRules(i) {
			if err := iptables(ctx, a.Family, append([]string{"-w", "-I"}, rule...)); err != nil {
				return err
			}
		}
	}
	return nil
}

// FixDNS lets the node's DNS queries through again.
func (n *RealNode) FixDNS(ctx context.Context) error {
	var errs []error
	for i, a := range n.cluster.Families {
		for _, rule := range n.dnsRules(i) {
			errs = append(errs, iptables(ctx, a.Family, append([]string{"-w", "-D"}, rule...)))
		}
	}
	return errors.Join(errs...)
}

// iptables runs iptables (ip6tables for IPv6) in the harness namespace (the
// test's own).
func iptables(ctx context.Context, family corev1.IPFamily, args []string) error {
	bin := iptablesFor(family)
	if out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", bin, strings.Join(args, " "), err, out)
	}
	return nil
}

// forget removes exited components from those the plane stops and whose
// logs it shows (a node started again adds its new ones).
func (cp *ControlPlane) forget(ps ...*Process) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	cp.extra = slices.DeleteFunc(cp.extra, func(e *Process) bool {
		exited, _ := e.Exited()
		return exited && slices.Contains(ps, e)
	})
}

// rerun starts an exited component again: the same binary, arguments and
// environment, its output appended to the same log. The new process
// replaces the old one among the components the plane stops and whose logs
// it shows.
func (cp *ControlPlane) rerun(old *Process) (*Process, error) {
	if exited, _ := old.Exited(); !exited {
		return nil, fmt.Errorf("%s is still running", old.Name)
	}
	// cmd.Env already holds the test's environment: startProcess adds it
	// again in front, and the later (same) values win.
	p, err := startProcess(filepath.Dir(old.LogPath), strings.TrimSuffix(filepath.Base(old.LogPath), ".log"),
		old.cmd.Path, old.cmd.Args[1:], old.cmd.Env, 0)
	if err != nil {
		return nil, err
	}
	p.Name = old.Name
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for i, e := range cp.extra {
		if e == old {
			cp.extra[i] = p
			return p, nil
		}
	}
	cp.extra = append(cp.extra, p)
	return p, nil
}
