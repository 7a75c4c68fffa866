package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParsePeerSlices(t *testing.T) {
	eight := "a,b,c,d,e,f,g,h"
	tests := []struct {
		value string
		names []string
		all   bool
	}{
		{"", nil, false},
		{"kube-node-ready-x7k2p", []string{"kube-node-ready-x7k2p"}, true},
		{"b,a,c", []string{"b", "a", "c"}, true},
		{eight, strings.Split(eight, ","), false},
		{eight + ",i", nil, false},
		{"a,,b", nil, false},
		{"a,a", nil, false},
		{"A", nil, false},
		{"a b", nil, false},
		{"-a", nil, false},
		{"a.", nil, false},
		{"a,b ", nil, false},
		{strings.Repeat("a", 254), nil, false},
		{`["a"]`, nil, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%.20q", tc.value), func(t *testing.T) {
			names, all := ParsePeerSlices(tc.value)
			if !slices.Equal(names, tc.names) || all != tc.all {
				t.Errorf("ParsePeerSlices(%q) = %q, %v; want %q, %v", tc.value, names, all, tc.names, tc.all)
			}
		})
	}
}

// FuzzParsePeerSlices: any value parses without panic into valid, distinct
// names, at most PeerSlicesHintLen, that format back to the value.
func FuzzParsePeerSlices(f *testing.F) {
	for _, s := range []string{"", "a", "a,b", "a,,b", "a,a", "A,b", "x.y-z,0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		names, all := ParsePeerSlices(value)
		if names == nil {
			return
		}
		if len(names) > PeerSlicesHintLen || all != (len(names) < PeerSlicesHintLen) || strings.Join(names, ",") != value {
			t.Fatalf("ParsePeerSlices(%q) = %q, %v", value, names, all)
		}
		for i, n := range names {
			if !isDNSSubdomain(n) || slices.Contains(names[:i], n) {
				t.Fatalf("ParsePeerSlices(%q): name %q", value, n)
			}
		}
	})
}

// TestFormatPeerSlicesIsTheRanking: the hint is the first names of the
// ranking, whatever order the names came in, and parses back to them.
func TestFormatPeerSlicesIsTheRanking(t *testing.T) {
	var names []string
	for i := range 30 {
		names = append(names, fmt.Sprintf("kube-node-ready-%05d", i*7919))
	}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	for _, node := range []string{"node-a", "node-b", "ip-10-0-0-1.ec2.internal"} {
		ranked := RankPeerSlices(node, names)
		hint := FormatPeerSlices(node, reversed)
		got, all := ParsePeerSlices(hint)
		if !slices.Equal(got, ranked[:PeerSlicesHintLen]) || all {
			t.Errorf("%s: hint %q, want the first %d of %q", node, hint, PeerSlicesHintLen, ranked)
		}
		for i := 1; i < len(ranked); i++ {
			if Rendezvous(node, ranked[i-1]) < Rendezvous(node, ranked[i]) {
				t.Fatalf("%s: %q ranked before %q", node, ranked[i-1], ranked[i])
			}
		}
	}
	if FormatPeerSlices("n", nil) != "" {
		t.Error("a hint without slices is not empty")
	}
	if got, all := ParsePeerSlices(FormatPeerSlices("n", names[:3])); len(got) != 3 || !all {
		t.Errorf("a hint of every slice: %q, %v", got, all)
	}
}
