package api

import (
	"strings"
	"testing"
)

// TestShippedFinalizers: the names --legacy-finalizers accepts are ours
// only (under our domains, never another controller's), and a caller cannot
// change the list.
func TestShippedFinalizers(t *testing.T) {
	for _, name := range []string{"karpenter.sh/termination", "kubernetes.io/pv-protection", "foregroundDeletion", "orphan", ""} {
		if IsShippedFinalizer(name) {
			t.Errorf("IsShippedFinalizer(%q) = true, want false: not ours", name)
		}
	}
	got := ShippedFinalizers()
	for _, name := range got {
		if !strings.HasPrefix(name, "infra.894.io/") && !strings.HasPrefix(name, "node-ready/") {
			t.Errorf("shipped finalizer %q is not under one of our domains", name)
		}
		if !IsShippedFinalizer(name) {
			t.Errorf("IsShippedFinalizer(%q) = false for a listed name", name)
		}
	}
	if want := strings.Join(got, ", "); len(got) > 0 && ShippedFinalizersText() != want {
		t.Errorf("ShippedFinalizersText() = %q, want %q", ShippedFinalizersText(), want)
	}
	if len(got) == 0 && ShippedFinalizersText() != "none" {
		t.Errorf("ShippedFinalizersText() = %q for an empty list, want none", ShippedFinalizersText())
	}
	if len(got) > 0 {
		got[0] = "karpenter.sh/termination"
		if IsShippedFinalizer("karpenter.sh/termination") {
			t.Error("changing the returned list changed the shipped names")
		}
	}
}

// TestHonouredFinalizers: every shipped name is honoured whatever the
// configuration names, the current finalizer never counts as an older one,
// and each name appears once.
func TestHonouredFinalizers(t *testing.T) {
	const custom = "example.com/custom-cleanup"
	for _, tt := range []struct {
		name    string
		current string
		legacy  []string
		want    []string
	}{
		{"the default name: nothing older", Finalizer, nil, nil},
		{"renamed without --legacy-finalizers", custom, nil, []string{Finalizer}},
		{"renamed, the shipped name also given", custom, []string{Finalizer}, []string{Finalizer}},
		{"the current name among the legacy ones", Finalizer, []string{Finalizer}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := HonouredFinalizers(tt.current, tt.legacy)
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("HonouredFinalizers(%q, %q) = %q, want %q", tt.current, tt.legacy, got, tt.want)
			}
		})
	}
	for _, name := range ShippedFinalizers() {
		if got := HonouredFinalizers(name+"-renamed", nil); !strings.Contains(strings.Join(got, ","), name) {
			t.Errorf("renamed away from %s: %q does not honour it", name, got)
		}
	}
}
