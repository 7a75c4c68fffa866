package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CleanupStatus is the document in CleanupStatusAnnotation: where a
// deleted node's cleanup stands, for `kubectl describe node` and the
// kubectl plugin.
type CleanupStatus struct {
	// Attempt counts this node's cleanup attempts in the webhook replica
	// that runs them, from 1.
	Attempt int `json:"attempt"`
	// Plugins maps each enabled plugin to its state (PluginState.String).
	Plugins map[string]string `json:"plugins"`
	// RetryIn is the delay before the next attempt, after a failed one.
	RetryIn string `json:"retryIn,omitempty"`
}

// PluginPhase is where one cleanup plugin stands in an attempt.
type PluginPhase string

// A cleanup plugin's phases.
const (
	PluginPending PluginPhase = "pending"
	PluginRunning PluginPhase = "running"
	PluginDone    PluginPhase = "done"
	PluginSkipped PluginPhase = "skipped"
	PluginDryRun  PluginPhase = "dry run"
	// PluginFailed is every way a plugin can fail: its cleanup returned an
	// error, timed out or panicked, or it was not run because its health
	// probe failed (a failure like any other: a critical one holds the node).
	PluginFailed PluginPhase = "failed"
)

// PluginState is one plugin's state in CleanupStatus.Plugins: its phase
// and, when skipped or failed, why.
type PluginState struct {
	Phase  PluginPhase
	Reason string
}

// String is the state as the document holds it: "phase" or "phase: reason".
func (s PluginState) String() string {
	if s.Reason == "" {
		return string(s.Phase)
	}
	return string(s.Phase) + ": " + s.Reason
}

// Failed reports whether the plugin failed.
func (s PluginState) Failed() bool { return s.Phase == PluginFailed }

// Unfinished reports whether the plugin is still pending or running.
func (s PluginState) Unfinished() bool { return s.Phase == PluginPending || s.Phase == PluginRunning }

// bareFailures are the results an earlier webhook wrote alone for a plugin
// that failed without an error; they read as failed, with the result as
// the reason.
var bareFailures = []string{"failure", "timeout", "panic", "unhealthy"}

// ParsePluginState reads a state as String writes it (and the bare
// failures of earlier webhooks). Only skipped and failed carry a reason.
func ParsePluginState(v string) (PluginState, error) {
	if phase, reason, ok := strings.Cut(v, ": "); ok {
		if p := PluginPhase(phase); p == PluginSkipped || p == PluginFailed {
			return PluginState{Phase: p, Reason: reason}, nil
		}
		return PluginState{}, fmt.Errorf("cleanup plugin state %q: only skipped and failed carry a reason", v)
	}
	switch p := PluginPhase(v); p {
	case PluginPending, PluginRunning, PluginDone, PluginSkipped, PluginDryRun, PluginFailed:
		return PluginState{Phase: p}, nil
	}
	if slices.Contains(bareFailures, v) {
		return PluginState{Phase: PluginFailed, Reason: v}, nil
	}
	return PluginState{}, fmt.Errorf("cleanup plugin state %q: unknown", v)
}

// State is the named plugin's state; a state that does not parse (the
// annotation is anyone's to edit) counts as finished, neither failed nor
// under way.
func (s *CleanupStatus) State(name string) PluginState {
	st, err := ParsePluginState(s.Plugins[name])
	if err != nil {
		return PluginState{Phase: PluginDone, Reason: s.Plugins[name]}
	}
	return st
}

// ParseCleanupStatus reads CleanupStatusAnnotation's value. Anything that
// is not the document the webhook writes is an error, never a panic: the
// annotation is on an object anyone with patch rights can edit.
func ParseCleanupStatus(value string) (*CleanupStatus, error) {
	var s CleanupStatus
	if err := json.Unmarshal([]byte(value), &s); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if s.Attempt < 1 {
		return nil, fmt.Errorf("attempt %d, want 1 or more", s.Attempt)
	}
	if s.Plugins == nil {
		return nil, errors.New("no plugins")
	}
	return &s, nil
}

// Counts tallies the plugins by kind of state: failed, running, pending,
// and finished (done, skipped, dry run).
func (s *CleanupStatus) Counts() (failed, running, pending, finished int) {
	for name := range s.Plugins {
		switch s.State(name).Phase {
		case PluginFailed:
			failed++
		case PluginRunning:
			running++
		case PluginPending:
			pending++
		default:
			finished++
		}
	}
	return
}

// Summary is the attempt and what holds the cleanup up, such as
// "attempt 2, 1 failed" or "attempt 1, 2 running, 1 pending"; when every
// plugin finished, "attempt 1, 3 done". The kubectl plugin shows it.
func (s *CleanupStatus) Summary() string {
	failed, running, pending, finished := s.Counts()
	parts := []string{fmt.Sprintf("attempt %d", s.Attempt)}
	for _, c := range []struct {
		n    int
		what string
	}{{failed, "failed"}, {running, "running"}, {pending, "pending"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if len(parts) == 1 {
		parts = append(parts, fmt.Sprintf("%d done", finished))
	}
	return strings.Join(parts, ", ")
}

// PluginNames are the plugins of the status, failed ones first, then by name.
func (s *CleanupStatus) PluginNames() []string {
	names := make([]string, 0, len(s.Plugins))
	for name := range s.Plugins {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		fa, fb := s.State(a).Failed(), s.State(b).Failed()
		switch {
		case fa && !fb:
			return -1
		case fb && !fa:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}
