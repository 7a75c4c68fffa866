package harness

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NetworkPolicies enforced on real nodes (ClusterOptions.NetworkPolicies):
// SIG Network's reference enforcer, sigs.k8s.io/kube-network-policies (pinned
// in test/tools/kube-network-policies, bin/kube-network-policies), runs on
// every real node in the node's namespaces, as kube-proxy does, with the
// credentials of the ServiceAccount kube-system/kube-network-policies and
// the RBAC of the enforcer's own install.yaml. It reads NetworkPolicies,
// Pods and Namespaces and gives each connection's first packet a verdict
// (accept or drop) on netfilter queue NetpolQueue.
//
// The packets reach that queue through rules the harness installs, not the
// enforcer's own: the enforcer writes an nftables table whose rules end in
// the nftables "queue" expression, and this machine's kernel is built
// without it (CONFIG_NFT_QUEUE is not set, and it has no loadable modules),
// so its table is refused ("conn.Receive: netlink receive: no such file or
// directory", logged by the enforcer at each sync) while the netfilter queue
// itself (CONFIG_NETFILTER_NETLINK_QUEUE) and the xtables NFQUEUE target work.
// The harness's rules mirror the enforcer's chain: at POSTROUTING, after
// DNAT (so Service traffic is judged by its pod), packets of established
// connections and those sent by root on the node (the kubelet's probes) pass;
// every other packet to or from the pod range goes to the queue, without
// the bypass flag, so nothing passes while the enforcer does not answer.
// The enforcer accepts the packets of pods no policy selects, as its own
// set of selected pods would have let them pass. On a kernel with the
// nftables queue expression the enforcer's own table loads too and judges
// the packets the harness's rules accepted a second time, with the same
// verdicts.

// NetpolQueue is the netfilter queue the enforcer reads.
const NetpolQueue = 100

// NetpolMetricsPort is where the enforcer serves its metrics on the node's
// address (kube_network_policies_packet_count{verdict} counts its verdicts).
const NetpolMetricsPort = 9080

// netpolChain is the harness's chain in the mangle table of each real node.
const netpolChain = "KNR-NETPOL"

// netpolIdentity is the enforcer's ServiceAccount (kube-system) and the
// name of its ClusterRole and ClusterRoleBinding.
const netpolIdentity = "kube-network-policies"

// NetpolMetricsURL is the enforcer's metrics endpoint on the node,
// reachable from the harness namespace.
func (n *RealNode) NetpolMetricsURL() string {
	return "http://" + net.JoinHostPort(n.IP, strconv.Itoa(NetpolMetricsPort)) + "/metrics"
}

// startNetworkPolicies starts the enforcer on n, waits until it reads its
// queue, then sends the pods' packets to it.
func (n *RealNode) startNetworkPolicies(ctx context.Context) error {
	cp := n.cluster.ControlPlane
	bin, err := LaterTool(context.Background(), cp.BinDir, "kube-network-policies")
	if err != nil {
		return fmt.Errorf("kube-network-policies: %w", err)
	}
	token, err := n.cluster.netpolToken(ctx)
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(n.Dir, "kube-network-policies.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	u, err := url.Parse(cp.Config.Host)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return err
	}
	// The enforcer reads its credentials where a pod's are (in-cluster
	// configuration): /var/run/secrets is on the node's own /run.
	const script = `set -eu
d=/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$d"
cp "$KNP_TOKEN" "$d/token"
cp "$KNP_CA" "$d/ca.crt"
exec "$KNP_BIN" "$@"
`
	args := []string{"-c", script, "kube-network-policies",
		"--hostname-override=" + n.Name,
		"--nfqueue-id=" + strconv.Itoa(NetpolQueue),
		"--metrics-bind-address=" + net.JoinHostPort(n.IP, strconv.Itoa(NetpolMetricsPort)),
		// Kernels from 6.12 have the conntrack fix this works around.
		"--netfilter-bug-1766-fix=false",
		"--disable-nri",
	}
	env := []string{"KNP_TOKEN=" + tokenFile, "KNP_CA=" + cp.CAFile, "KNP_BIN=" + bin,
		"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port}
	p, err := n.enter("kube-network-policies", "/bin/sh", args, env)
	if err != nil {
		return err
	}
	// The queue is listed in the node's /proc/net/netfilter/nfnetlink_queue
	// once the enforcer has synced its caches and bound it.
	err = waitFor(ctx, p, time.Minute, func() (bool, error) {
		out, err := n.run(ctx, "cat", "/proc/net/netfilter/nfnetlink_queue")
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == strconv.Itoa(NetpolQueue) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("kube-network-policies on %s never read queue %d: %w\n%s", n.Name, NetpolQueue, err, p.Tail(20))
	}
	for _, a := range n.cluster.Families {
		iptables := "iptables"
		if a.Family == corev1.IPv6Protocol {
			iptables = "ip6tables"
		}
		rules := [][]string{
			{"-t", "mangle", "-N", netpolChain},
			{"-t", "mangle", "-A", netpolChain, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
			{"-t", "mangle", "-A", netpolChain, "-m", "owner", "--uid-owner", "0", "-j", "RETURN"},
			{"-t", "mangle", "-A", netpolChain, "-s", a.PodCIDR, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(NetpolQueue)},
			{"-t", "mangle", "-A", netpolChain, "-d", a.PodCIDR, "-j", "NFQUEUE", "--queue-num", strconv.Itoa(NetpolQueue)},
			{"-t", "mangle", "-A", "POSTROUTING", "-j", netpolChain},
		}
		for _, r := range rules {
			if _, err := n.run(ctx, iptables, r...); err != nil {
				return err
			}
		}
	}
	n.cluster.logf("kube-network-policies on %s judges the pods' packets (queue %d)", n.Name, NetpolQueue)
	return nil
}

// netpolToken creates the enforcer's ServiceAccount and RBAC once (the
// nodes start side by side) and returns a token of the ServiceAccount.
func (c *Cluster) netpolToken(ctx context.Context) (string, error) {
	objs := []func() error{
		func() error {
			_, err := c.Client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{
				ObjectMeta: metav1.ObjectMeta{Name: netpolIdentity}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
				ObjectMeta: metav1.ObjectMeta{Name: netpolIdentity},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
					{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
				},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: netpolIdentity},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: netpolIdentity},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: netpolIdentity}},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("kube-network-policies RBAC: %w", err)
		}
	}
	tr, err := c.Client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, netpolIdentity, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("kube-network-policies token: %w", err)
	}
	return tr.Status.Token, nil
}
