//go:build e2e

package chart_test

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file judges a connection against NetworkPolicies as the
// networking.k8s.io/v1 API defines them (the semantics every implementation
// shares), so a rendering test can say which flows a chart's policies cut
// without a CNI that enforces them.

// party is one end of a connection: a pod in the pod network, or an address
// outside it (the API server, a node).
type party struct {
	name string
	// pod is false for an address outside the pod network: pod and
	// namespace selectors never select it, only ipBlock does.
	pod       bool
	namespace string
	nsLabels  map[string]string
	labels    map[string]string
	ip        netip.Addr
	// ports are the pod's container ports, which named ports resolve to.
	ports []corev1.ContainerPort
}

// flow is a connection from one party to a port of another.
type flow struct {
	name     string
	from, to party
	port     int32
	protocol corev1.Protocol
}

// allowed reports whether policies let f through: egress policies selecting
// its source and ingress policies selecting its destination must each have
// a rule admitting it (or select it in that direction not at all). why
// names the policies that cut it; err reports a policy the API would not
// accept as the semantics need it (a peer that selects nothing).
func allowed(policies []networkingv1.NetworkPolicy, f flow) (ok bool, why string, err error) {
	egressOK, egressWhy, err := direction(policies, f, networkingv1.PolicyTypeEgress)
	if err != nil {
		return false, "", err
	}
	ingressOK, ingressWhy, err := direction(policies, f, networkingv1.PolicyTypeIngress)
	if err != nil {
		return false, "", err
	}
	switch {
	case !egressOK:
		return false, egressWhy, nil
	case !ingressOK:
		return false, ingressWhy, nil
	}
	return true, "", nil
}

// direction judges f on one side: the policies selecting its source (for
// egress) or its destination (for ingress).
func direction(policies []networkingv1.NetworkPolicy, f flow, dir networkingv1.PolicyType) (bool, string, error) {
	subject, other := f.to, f.from
	if dir == networkingv1.PolicyTypeEgress {
		subject, other = f.from, f.to
	}
	if !subject.pod {
		return true, "", nil
	}
	var selecting []string
	for _, p := range policies {
		if p.Namespace != subject.namespace || !hasType(p, dir) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			return false, "", fmt.Errorf("NetworkPolicy %s: podSelector: %w", p.Name, err)
		}
		if !sel.Matches(labels.Set(subject.labels)) {
			continue
		}
		selecting = append(selecting, p.Name)
		for i := range ruleCount(p, dir) {
			ports, peers := rule(p, dir, i)
			pm, err := portsMatch(ports, f.to, f.port, f.protocol)
			if err != nil {
				return false, "", fmt.Errorf("NetworkPolicy %s: %w", p.Name, err)
			}
			if !pm {
				continue
			}
			ok, err := peersMatch(peers, p.Namespace, other)
			if err != nil {
				return false, "", fmt.Errorf("NetworkPolicy %s: %w", p.Name, err)
			}
			if ok {
				return true, "", nil
			}
		}
	}
	if len(selecting) == 0 {
		return true, "", nil
	}
	return false, fmt.Sprintf("%s of %s is cut by NetworkPolicy %v: no rule admits %s on %d/%s", dir, subject.name, selecting, other.name, f.port, f.protocol), nil
}

// hasType is whether p restricts direction dir; without policyTypes, a
// policy restricts ingress, and egress when it has egress rules.
func hasType(p networkingv1.NetworkPolicy, dir networkingv1.PolicyType) bool {
	if len(p.Spec.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, dir)
}

func ruleCount(p networkingv1.NetworkPolicy, dir networkingv1.PolicyType) int {
	if dir == networkingv1.PolicyTypeEgress {
		return len(p.Spec.Egress)
	}
	return len(p.Spec.Ingress)
}

func rule(p networkingv1.NetworkPolicy, dir networkingv1.PolicyType, i int) ([]networkingv1.NetworkPolicyPort, []networkingv1.NetworkPolicyPeer) {
	if dir == networkingv1.PolicyTypeEgress {
		return p.Spec.Egress[i].Ports, p.Spec.Egress[i].To
	}
	return p.Spec.Ingress[i].Ports, p.Spec.Ingress[i].From
}

// portsMatch is whether ports admit port/protocol on dst; no ports admit
// every port, and a named port means the destination pod's port of that
// name (in both directions).
func portsMatch(ports []networkingv1.NetworkPolicyPort, dst party, port int32, protocol corev1.Protocol) (bool, error) {
	if len(ports) == 0 {
		return true, nil
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != protocol {
			continue
		}
		switch {
		case p.Port == nil:
			return true, nil
		case p.Port.Type == intstr.Int:
			end := p.Port.IntVal
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if port >= p.Port.IntVal && port <= end {
				return true, nil
			}
		case p.EndPort != nil:
			return false, fmt.Errorf("endPort %d with the named port %q", *p.EndPort, p.Port.StrVal)
		default:
			for _, cp := range dst.ports {
				cproto := cp.Protocol
				if cproto == "" {
					cproto = corev1.ProtocolTCP
				}
				if cp.Name == p.Port.StrVal && cproto == protocol && cp.ContainerPort == port {
					return true, nil
				}
			}
		}
	}
	return false, nil
}

// peersMatch is whether peers (of a policy in namespace ns) select other;
// no peers select every source or destination.
func peersMatch(peers []networkingv1.NetworkPolicyPeer, ns string, other party) (bool, error) {
	if len(peers) == 0 {
		return true, nil
	}
	for _, peer := range peers {
		if peer.IPBlock == nil && peer.NamespaceSelector == nil && peer.PodSelector == nil {
			return false, fmt.Errorf("a peer with neither podSelector, namespaceSelector nor ipBlock (the API refuses it)")
		}
		if b := peer.IPBlock; b != nil {
			in, err := inBlock(*b, other.ip)
			if err != nil {
				return false, err
			}
			if in {
				return true, nil
			}
			continue
		}
		if !other.pod {
			continue
		}
		nsOK := other.namespace == ns
		if peer.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
			if err != nil {
				return false, fmt.Errorf("namespaceSelector: %w", err)
			}
			nsOK = sel.Matches(labels.Set(other.nsLabels))
		}
		podOK := true
		if peer.PodSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err != nil {
				return false, fmt.Errorf("podSelector: %w", err)
			}
			podOK = sel.Matches(labels.Set(other.labels))
		}
		if nsOK && podOK {
			return true, nil
		}
	}
	return false, nil
}

// inBlock is whether ip is in b's CIDR and none of its exceptions.
func inBlock(b networkingv1.IPBlock, ip netip.Addr) (bool, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return false, fmt.Errorf("ipBlock: %w", err)
	}
	if !ip.IsValid() || !cidr.Contains(ip) {
		return false, nil
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return false, fmt.Errorf("ipBlock except: %w", err)
		}
		if ex.Contains(ip) {
			return false, nil
		}
	}
	return true, nil
}
