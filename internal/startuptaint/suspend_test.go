package startuptaint

import (
	"errors"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

type fakeSwitch suspend.State

func (s fakeSwitch) State() suspend.State { return suspend.State(s) }

// TestSuspendHoldsInjection: while the operator's switch is on, or cannot
// be read, a node that would get the startup taint gets none and is marked
// suspended; the other outcomes are not the switch's to change.
func TestSuspendHoldsInjection(t *testing.T) {
	on := fakeSwitch{Known: true, On: true, Reason: "incident"}
	for _, tc := range []struct {
		name string
		sw   Switch
		want Outcome
	}{
		{"no switch", nil, Added},
		{"switch off", fakeSwitch{Known: true}, Added},
		{"switch on", on, Suspended},
		{"switch unreadable", fakeSwitch{Err: errors.New("forbidden")}, Suspended},
		{"switch not read yet", fakeSwitch{}, Suspended},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Injector{Config: config(), Suspend: tc.sw}
			d := in.Decide(t.Context(), linuxNode(nil))
			if d.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", d.Outcome, d.Why, tc.want)
			}
			if tc.want == Suspended && d.Taint != nil {
				t.Errorf("a suspended decision carries taint %v", d.Taint)
			}
		})
	}
	in := &Injector{Config: config(), Suspend: on}
	if d := in.Decide(t.Context(), linuxNode(nil, caTaint)); d.Outcome != Present {
		t.Errorf("a node created with our key: %s while suspended, want %s", d.Outcome, Present)
	}
}
