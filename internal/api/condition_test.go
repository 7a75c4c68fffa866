package api

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestConditionMessageRoundTrip(t *testing.T) {
	since := time.Date(2026, 11, 21, 14, 1, 2, 0, time.UTC)
	tests := []struct {
		name string
		m    ConditionMessage
		want string
	}{
		{name: "failing", m: ConditionMessage{Summary: "checks failing", Failing: []string{"dns", "network"}, Since: since, HasModes: true, Continuous: []string{"dns", "api"}},
			want: "checks failing; failing: dns,network; since: 2026-11-21T14:01:02Z; continuous: dns,api; bootstrap: none"},
		{name: "recovering", m: ConditionMessage{Summary: "checks pass again", Passed: 1, Needed: 2, HasModes: true, Continuous: []string{"dns"}, Bootstrap: []string{"network"}},
			want: "checks pass again; passed: 1/2; continuous: dns; bootstrap: network"},
		{name: "bypassed", m: ConditionMessage{Summary: "checks bypassed", Annotation: "node-ready/skip-verification=true"},
			want: "checks bypassed; annotation: node-ready/skip-verification=true"},
		{name: "boot recorded", m: ConditionMessage{Summary: "all checks pass", HasModes: true, Continuous: []string{"dns"}, Boot: "0e3c5a8e-6b1f-4c3d-9a41-2f7d8b9c1a20"},
			want: "all checks pass; continuous: dns; bootstrap: none; boot: 0e3c5a8e-6b1f-4c3d-9a41-2f7d8b9c1a20"},
		{name: "summary only", m: ConditionMessage{Summary: "all checks pass"}, want: "all checks pass"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.String(); got != tt.want {
				t.Fatalf("String() = %q, want %q", got, tt.want)
			}
			back, err := ParseConditionMessage(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tt.m) {
				t.Errorf("ParseConditionMessage(%q) = %+v, want %+v", tt.want, back, tt.m)
			}
		})
	}
}

func TestParseConditionMessageRefusesOtherShapes(t *testing.T) {
	for _, in := range []string{
		"all checks pass; since: yesterday",
		"x; passed: 3",
		"x; passed: 1/0",
		"x; colour: blue",
		"x; failing: a; failing: b",
	} {
		if m, err := ParseConditionMessage(in); err == nil {
			t.Errorf("ParseConditionMessage(%q) = %+v, want an error", in, m)
		} else if !strings.Contains(err.Error(), "condition message") {
			t.Errorf("error %q does not say what it read", err)
		}
	}
}

// TestParseConditionMessageOfOlderAgents: the message agents wrote before
// this encoding reads as a summary with its check lists.
func TestParseConditionMessageOfOlderAgents(t *testing.T) {
	m, err := ParseConditionMessage("failing: dns,network (since 2026-11-21T14:01:02Z); continuous: dns,api; bootstrap: none")
	if err != nil {
		t.Fatal(err)
	}
	if m.Summary != "failing: dns,network (since 2026-11-21T14:01:02Z)" || !reflect.DeepEqual(m.Continuous, []string{"dns", "api"}) || m.Bootstrap != nil {
		t.Errorf("got %+v", m)
	}
}

func FuzzParseConditionMessage(f *testing.F) {
	f.Add("checks failing; failing: dns,network; since: 2026-11-21T14:01:02Z; continuous: dns,api; bootstrap: none")
	f.Add("checks pass again; passed: 1/2")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseConditionMessage(s)
		if err != nil {
			return
		}
		// What parses re-encodes to something that parses the same.
		again, err := ParseConditionMessage(m.String())
		if err != nil {
			t.Fatalf("re-encoded %q: %v", m.String(), err)
		}
		if again.String() != m.String() {
			t.Fatalf("not stable: %q then %q", m.String(), again.String())
		}
	})
}
