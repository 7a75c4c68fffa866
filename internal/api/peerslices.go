package api

import (
	"hash/fnv"
	"slices"
	"strings"
)

// PeerSlicesAnnotation is written by the webhook's admission on a new Node:
// the names of the agents' peer Service's EndpointSlices, comma-separated,
// the first PeerSlicesHintLen of them in the order RankPeerSlices gives for
// the node's name (all of them, when there are fewer). The node's agent
// reads and follows those slices instead of listing every slice's name to
// rank them, so what a join reads does not grow with the fleet. It is a
// hint only: absent, garbage or naming slices that no longer exist, the
// agent lists the names as it would without it.
const PeerSlicesAnnotation = "node-ready/peer-slices"

// PeerSlicesHintLen is how many names the hint holds at most: a few more
// than one slice per address family, so that a dual-stack Service's first
// ranked slices hold both families in all but 2 in 2^8 nodes.
const PeerSlicesHintLen = 8

// Rendezvous is the rendezvous (highest random weight) score of target for
// self: FNV-1a of both, then MurmurHash3's finalizer. FNV alone weighs names
// that differ only in their last characters (addresses, slice names -1, -2,
// ...) in nearly the same order for every self: 1 000 nodes ranking ten such
// slices put half of them on two. The agents rank their peers'
// EndpointSlices, and the peers within them, by it, and the webhook ranks
// the slices by it for the hint: one function, so that both pick the same.
func Rendezvous(self, target string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(self))
	h.Write([]byte{0})
	h.Write([]byte(target))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// RankPeerSlices returns names ordered as node's agent ranks its peer
// slices: highest Rendezvous(node, name) first, ties by name.
func RankPeerSlices(node string, names []string) []string {
	ranked := slices.Clone(names)
	slices.SortFunc(ranked, func(a, b string) int {
		sa, sb := Rendezvous(node, a), Rendezvous(node, b)
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return strings.Compare(a, b)
	})
	return ranked
}

// FormatPeerSlices is the hint for node from the names of every slice of
// the peer Service: the first PeerSlicesHintLen of RankPeerSlices, joined
// with commas; "" when there are none.
func FormatPeerSlices(node string, names []string) string {
	ranked := RankPeerSlices(node, names)
	return strings.Join(ranked[:min(len(ranked), PeerSlicesHintLen)], ",")
}

// ParsePeerSlices reads a PeerSlicesAnnotation value: the names in its
// order, and whether they are every slice the Service had when it was
// written (fewer than PeerSlicesHintLen). A value that is not such a list
// (an empty or invalid name, a repeated one, too many) yields none: the
// agent then chooses without the hint.
func ParsePeerSlices(value string) (names []string, all bool) {
	if value == "" {
		return nil, false
	}
	names = strings.Split(value, ",")
	if len(names) > PeerSlicesHintLen {
		return nil, false
	}
	for i, n := range names {
		if !isDNSSubdomain(n) || slices.Contains(names[:i], n) {
			return nil, false
		}
	}
	return names, len(names) < PeerSlicesHintLen
}

// isDNSSubdomain reports whether s is a valid object name (RFC 1123
// subdomain), as every EndpointSlice's is.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
