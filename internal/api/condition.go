package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ConditionMessage is what the agent's condition message says, encoded so
// that people read it in `kubectl describe node` and programs read it back
// without parsing prose: a summary, then "; key: value" fields in a fixed
// order, each present only when it says something:
//
//	checks failing; failing: dns,network; since: 2026-11-21T14:01:02Z; continuous: dns,api; bootstrap: none
//
// Check names never hold ";", "," or ": ", so the fields split cleanly.
type ConditionMessage struct {
	// Summary is a short sentence for people.
	Summary string
	// Failing are the checks that failed in the latest round.
	Failing []string
	// Since is the first failed round of the current streak.
	Since time.Time
	// Passed and Needed count a re-tainted node's passing rounds in a row
	// and how many untaint it.
	Passed, Needed int
	// Annotation is the bypass annotation, when it is what decided.
	Annotation string
	// Continuous and Bootstrap are the agent's check lists; nil is none.
	Continuous, Bootstrap []string
	// HasModes says whether the check lists are part of the message.
	HasModes bool
	// Boot is the node's boot ID (status.nodeInfo.bootID) it was last
	// verified under, written while re-verification after a reboot is on
	// (--reverify-after-reboot): a node whose boot ID differs rebooted
	// since, and is held until it verifies again.
	Boot string
}

// The message's keys, in their order.
const (
	keyFailing    = "failing"
	keySince      = "since"
	keyPassed     = "passed"
	keyAnnotation = "annotation"
	keyContinuous = "continuous"
	keyBootstrap  = "bootstrap"
	keyBoot       = "boot"
)

// String encodes the message.
func (m ConditionMessage) String() string {
	parts := []string{m.Summary}
	add := func(key, value string) { parts = append(parts, key+": "+value) }
	if len(m.Failing) > 0 {
		add(keyFailing, strings.Join(m.Failing, ","))
	}
	if !m.Since.IsZero() {
		add(keySince, m.Since.UTC().Format(time.RFC3339))
	}
	if m.Needed > 0 {
		add(keyPassed, fmt.Sprintf("%d/%d", m.Passed, m.Needed))
	}
	if m.Annotation != "" {
		add(keyAnnotation, m.Annotation)
	}
	if m.HasModes {
		add(keyContinuous, list(m.Continuous))
		add(keyBootstrap, list(m.Bootstrap))
	}
	if m.Boot != "" {
		add(keyBoot, m.Boot)
	}
	return strings.Join(parts, "; ")
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ",")
}

// unlist reads a list that list wrote. A list whose only name is "none",
// however it is spaced or trailed by commas, is the empty list, as list
// writes it: otherwise it would read back as the check "none" and encode as
// the empty list.
func unlist(s string) []string {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			out = append(out, name)
		}
	}
	if len(out) == 1 && out[0] == "none" {
		return nil
	}
	return out
}

// ParseConditionMessage decodes a message String wrote. A message in any
// other shape (an older agent's, or edited by hand) is an error; the
// caller shows it whole.
func ParseConditionMessage(s string) (ConditionMessage, error) {
	fields := strings.Split(s, "; ")
	m := ConditionMessage{Summary: fields[0]}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		key, value, ok := strings.Cut(f, ": ")
		if !ok || seen[key] {
			return ConditionMessage{}, fmt.Errorf("condition message %q: field %q is not key: value, or repeated", s, f)
		}
		seen[key] = true
		switch key {
		case keyFailing:
			m.Failing = unlist(value)
		case keySince:
			t, err := time.Parse(time.RFC3339, value)
			if err != nil {
				return ConditionMessage{}, fmt.Errorf("condition message %q: since: %w", s, err)
			}
			m.Since = t
		case keyPassed:
			p, n, ok := strings.Cut(value, "/")
			passed, err1 := strconv.Atoi(p)
			needed, err2 := strconv.Atoi(n)
			if !ok || err1 != nil || err2 != nil || needed < 1 {
				return ConditionMessage{}, fmt.Errorf("condition message %q: passed: want N/M, got %q", s, value)
			}
			m.Passed, m.Needed = passed, needed
		case keyAnnotation:
			m.Annotation = value
		case keyContinuous:
			m.Continuous, m.HasModes = unlist(value), true
		case keyBootstrap:
			m.Bootstrap, m.HasModes = unlist(value), true
		case keyBoot:
			m.Boot = value
		default:
			return ConditionMessage{}, fmt.Errorf("condition message %q: unknown field %q", s, key)
		}
	}
	return m, nil
}
