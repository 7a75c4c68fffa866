package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// nodeLinkAddress is the address of host (1: the harness namespace's end)
// or node (2: the node's InternalIP) on real node i's link, in family:
// 10.214.i.host/24 or fd00:10:214:i::host/64.
func nodeLinkAddress(family corev1.IPFamily, i, host int) string {
	if family == corev1.IPv6Protocol {
		return fmt.Sprintf(realNodeNet6, i, host)
	}
	return fmt.Sprintf(realNodeNet, i, host)
}

// linkPrefix is the prefix length of the nodes' links in family.
func linkPrefix(family corev1.IPFamily) string {
	if family == corev1.IPv6Protocol {
		return "/64"
	}
	return "/24"
}

// nodeIPv6Sysctls turn IPv6 on in a node's namespace with forwarding (it
// routes for its pods) and without duplicate address detection, whose
// seconds of "tentative" addresses would only delay the node and its pods
// on links nothing else shares. They are written before any address is
// added, so the bridge the CNI plugin creates inherits them.
const nodeIPv6Sysctls = `for c in all default lo eth0; do
  echo 0 > /proc/sys/net/ipv6/conf/$c/disable_ipv6
  echo 0 > /proc/sys/net/ipv6/conf/$c/accept_dad
done
echo 1 > /proc/sys/net/ipv6/conf/all/forwarding
echo 1 > /proc/sys/net/bridge/bridge-nf-call-ip6tables
`

// configureLink gives the node (its network namespace held by pid) its
// link: a veth pair with the host end in the harness namespace, an address
// of every family of the cluster at each end, a default route per family to
// the harness namespace, and the node's forwarding and bridge sysctls, all
// in the node's own namespace. The kernel here has no dummy device: a veth
// pair is the node's link.
func (n *RealNode) configureLink(ctx context.Context, pid int) error {
	link := []string{"ip", "link", "add", n.hostLink, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(pid)}
	if out, err := exec.CommandContext(ctx, link[0], link[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(link, " "), err, out)
	}
	var steps [][]string
	inNode := "set -eu\nip link set lo up\n"
	for _, a := range n.cluster.Families {
		host, node := nodeLinkAddress(a.Family, n.index, 1), nodeLinkAddress(a.Family, n.index, 2)
		addr := []string{"ip", "addr", "add", host + linkPrefix(a.Family), "dev", n.hostLink}
		if a.Family == corev1.IPv6Protocol {
			// nodad: usable at once; keep_addr_on_down: CutOff's link down
			// must not flush the address (it does not flush an IPv4 one).
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+n.hostLink+"/keep_addr_on_down", []byte("1"), 0o644); err != nil {
				return fmt.Errorf("keep the IPv6 address of %s on link down: %w", n.hostLink, err)
			}
			addr = append(addr, "nodad")
			inNode += nodeIPv6Sysctls + fmt.Sprintf("ip -6 addr add %s/64 dev eth0 nodad\n", node)
		} else {
			inNode += fmt.Sprintf("ip addr add %s/24 dev eth0\n", node) + `echo 1 > /proc/sys/net/ipv4/ip_forward
echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet
`
		}
		steps = append(steps, addr)
	}
	steps = append(steps, []string{"ip", "link", "set", n.hostLink, "up"})
	inNode += "ip link set eth0 up\n"
	for _, a := range n.cluster.Families {
		inNode += fmt.Sprintf("ip route add default via %s\n", nodeLinkAddress(a.Family, n.index, 1))
	}
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(pid), "--net", "--", "/bin/sh", "-c", inNode)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("configure node network: %v: %s", err, out)
	}
	return nil
}

// configurePodNetwork waits for the pod ranges kube-controller-manager gives
// the registered Node (one per family), writes the node's CNI configuration
// (a bridge with host-local addresses from those ranges) and routes the
// ranges to the node from the harness namespace, as a network plugin's
// agent would.
func (n *RealNode) configurePodNetwork(ctx context.Context) error {
	err := n.waitNode(ctx, 60*time.Second, func(node *corev1.Node) bool {
		n.PodCIDRs = node.Spec.PodCIDRs
		return len(n.PodCIDRs) == len(n.cluster.Families)
	})
	if err != nil {
		return fmt.Errorf("no pod range of each family (%v) assigned to the registered node: %w", n.PodCIDRs, err)
	}
	n.PodCIDR = n.PodCIDRs[0]
	conf, err := cniConfig(n.PodCIDRs)
	if err != nil {
		return err
	}
	tmp := filepath.Join(n.Dir, "cni", ".10-knr.conflist")
	if err := os.WriteFile(tmp, conf, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(n.Dir, "cni", "10-knr.conflist")); err != nil {
		return err
	}
	return n.routePods(ctx, true)
}

// cniConfig is a node's CNI configuration: the bridge plugin as the pods'
// gateway, host-local addresses from each pod range with a default route
// per family, and portmap.
func cniConfig(podCIDRs []string) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, cidr := range podCIDRs {
		ranges = append(ranges, []map[string]string{{"subnet": cidr}})
		dst := "0.0.0.0/0"
		if AddressType(strings.SplitN(cidr, "/", 2)[0]) == discoveryv1.AddressTypeIPv6 {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "knr",
		"plugins": []map[string]any{
			{
				"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{"type": "host-local", "ranges": ranges, "routes": routes},
			},
			{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// routePods adds (or, with up false, replaces with an unreachable route)
// the harness namespace's route to each of the node's pod ranges.
func (n *RealNode) routePods(ctx context.Context, up bool) error {
	for i, cidr := range n.PodCIDRs {
		args := []string{"route", "replace", cidr, "via", n.IPs[i]}
		if !up {
			args = []string{"route", "replace", "unreachable", cidr}
		}
		if strings.Contains(cidr, ":") {
			args = append([]string{"-6"}, args...)
		}
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
