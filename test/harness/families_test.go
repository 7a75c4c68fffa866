package harness

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestFamilyAddresses: no families is IPv4 alone; one or two distinct
// families keep their order (primary first); anything else is refused.
func TestFamilyAddresses(t *testing.T) {
	for _, tc := range []struct {
		in   []corev1.IPFamily
		want []corev1.IPFamily
	}{
		{nil, []corev1.IPFamily{corev1.IPv4Protocol}},
		{[]corev1.IPFamily{"IPv6"}, []corev1.IPFamily{corev1.IPv6Protocol}},
		{[]corev1.IPFamily{"IPv6", "IPv4"}, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}},
	} {
		got, err := familyAddresses(tc.in)
		if err != nil {
			t.Fatalf("%v: %v", tc.in, err)
		}
		var fams []corev1.IPFamily
		for _, a := range got {
			fams = append(fams, a.Family)
		}
		if !reflect.DeepEqual(fams, tc.want) {
			t.Errorf("%v: families %v, want %v", tc.in, fams, tc.want)
		}
	}
	for _, bad := range [][]corev1.IPFamily{{"IPv6", "IPv6"}, {"IPv5"}, {"IPv4", "IPv6", "IPv4"}} {
		if _, err := familyAddresses(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestNodeCIDRMaskArgs: IPv4 single-stack keeps the one flag it always
// had; IPv6 and dual-stack get a flag per family (kube-controller-manager
// refuses the one flag in dual-stack).
func TestNodeCIDRMaskArgs(t *testing.T) {
	for _, tc := range []struct {
		fams []Addresses
		want []string
	}{
		{[]Addresses{IPv4}, []string{"--node-cidr-mask-size=24"}},
		{[]Addresses{IPv6}, []string{"--node-cidr-mask-size-ipv6=64"}},
		{[]Addresses{IPv4, IPv6}, []string{"--node-cidr-mask-size-ipv4=24", "--node-cidr-mask-size-ipv6=64"}},
	} {
		if got := nodeCIDRMaskArgs(tc.fams); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.fams, got, tc.want)
		}
	}
}

// TestCNIConfigRangesPerFamily: a dual-stack node's bridge gets a
// host-local range and a default route per family, in the pod ranges' order.
func TestCNIConfigRangesPerFamily(t *testing.T) {
	b, err := cniConfig([]string{"10.244.1.0/24", "fd00:10:244:1::/64"})
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type string
			IPAM struct {
				Ranges [][]struct{ Subnet string }
				Routes []struct{ Dst string }
			}
		}
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	ipam := conf.Plugins[0].IPAM
	if conf.Plugins[0].Type != "bridge" || len(ipam.Ranges) != 2 || ipam.Ranges[0][0].Subnet != "10.244.1.0/24" || ipam.Ranges[1][0].Subnet != "fd00:10:244:1::/64" {
		t.Errorf("ranges: %s", b)
	}
	if len(ipam.Routes) != 2 || ipam.Routes[0].Dst != "0.0.0.0/0" || ipam.Routes[1].Dst != "::/0" {
		t.Errorf("routes: %s", b)
	}
}
