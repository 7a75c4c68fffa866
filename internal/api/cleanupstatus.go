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
	// Plugins maps each enabled plugin to its state: one of the Plugin*
	// states, "skipped: reason" or "failed: reason".
	Plugins map[string]string `json:"plugins"`
	// RetryIn is the delay before the next attempt, after a failed one.
	RetryIn string `json:"retryIn,omitempty"`
}

// A cleanup plugin's states in CleanupStatus.Plugins.
const (
	PluginPending = "pending"
	PluginRunning = "running"
	PluginDone    = "done"
	PluginSkipped = "skipped"
	PluginDryRun  = "dry run"
	PluginFailed  = "failed"
)

// PluginStateFailed reports whether a plugin state is a failure:
// "failed: reason", or a bare failing result (failure, timeout, panic).
func PluginStateFailed(state string) bool {
	return strings.HasPrefix(state, PluginFailed) || state == "failure" || state == "timeout" || state == "panic"
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
	for _, st := range s.Plugins {
		switch {
		case PluginStateFailed(st):
			failed++
		case st == PluginRunning:
			running++
		case st == PluginPending:
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
		fa, fb := PluginStateFailed(s.Plugins[a]), PluginStateFailed(s.Plugins[b])
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
