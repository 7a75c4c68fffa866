package api

import (
	"encoding/json"
	"errors"
	"fmt"
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
