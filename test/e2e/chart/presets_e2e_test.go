//go:build e2e

package chart_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
)

// TestPresetsMatchTheBinaries: for every autoscaler preset, the chart
// renders the taints the binaries resolve from --autoscaler, and its
// own-node policy lets the agent remove exactly the previous keys the agent
// removes (every preset's and agent.previousTaintKeys, the keys in use left
// out), and the webhook pods tolerate the startup taint. The chart keeps its own copy of the presets' table; this is what
// keeps the two the same.
func TestPresetsMatchTheBinaries(t *testing.T) {
	for _, name := range api.PresetNames() {
		t.Run(name, func(t *testing.T) {
			out, err := helm(t, "template", release, chart, "-n", namespace, "--kube-version", "1.36.0",
				"--set", "autoscaler="+name, "--set", "agent.previousTaintKeys={example.com/old}",
				"--set", "webhook.remediation.policy=report")
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			keys, err := cli.TaintFlags{Autoscaler: name, Previous: []string{"example.com/old"}}.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			for _, arg := range []string{
				"--autoscaler=" + name,
				"--startup-taint=" + keys.Startup, "--unhealthy-taint=" + keys.Unhealthy,
				"--agent-startup-taint=" + keys.Startup, "--agent-unhealthy-taint=" + keys.Unhealthy,
				"--previous-taint-keys=example.com/old",
			} {
				if !strings.Contains(out, "- "+arg+"\n") {
					t.Errorf("the rendered chart lacks the argument %s", arg)
				}
			}
			startup, err := cli.ParseTaint(keys.Startup)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "key: "+startup.Key+"\n") {
				t.Errorf("the webhook pods do not tolerate the startup taint %s: they could not run on unverified nodes", startup.Key)
			}
			if strings.Contains(out, "--unverified-deadline") {
				t.Error("an empty webhook.remediation.unverifiedDeadline still renders --unverified-deadline: the preset's default would not apply")
			}
			got := policyPreviousKeys(t, out)
			want := slices.Concat(keys.PreviousStartup, keys.PreviousUnhealthy)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("the own-node policy's previous keys %v, want the agent's %v", got, want)
			}
		})
	}
}

// policyPreviousKeys reads the previousKeys variable of the rendered
// own-node policy: a CEL list literal, which is also JSON.
func policyPreviousKeys(t *testing.T, rendered string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(rendered, "- name: previousKeys\n")
	if !ok {
		t.Fatal("the own-node policy has no previousKeys variable")
	}
	line, _, _ := strings.Cut(rest, "\n")
	expr, ok := strings.CutPrefix(strings.TrimSpace(line), "expression: ")
	if !ok {
		t.Fatalf("previousKeys: %q", line)
	}
	var keys []string
	if err := json.Unmarshal([]byte(strings.Trim(expr, "'")), &keys); err != nil {
		t.Fatalf("previousKeys %s: %v", expr, err)
	}
	return keys
}

// TestNotesWarnAboutTheDeadline: the chart's notes name the startup taint
// to register nodes with, and warn about a remediation deadline past
// Cluster Autoscaler's 15 minutes under its preset, and only then.
func TestNotesWarnAboutTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		sets  []string
		taint string
		warn  bool
	}{
		{sets: nil, taint: api.CAStartupTaintKey},
		{sets: []string{"webhook.remediation.policy=report"}, taint: api.CAStartupTaintKey},
		{sets: []string{"webhook.remediation.policy=report", "webhook.remediation.unverifiedDeadline=14m59s"}, taint: api.CAStartupTaintKey},
		{sets: []string{"webhook.remediation.policy=report", "webhook.remediation.unverifiedDeadline=1h30m"}, taint: api.CAStartupTaintKey, warn: true},
		{sets: []string{"webhook.remediation.policy=report", "webhook.remediation.unverifiedDeadline=20m", "autoscaler=karpenter"}, taint: api.KarpenterStartupTaintKey},
		{sets: []string{"webhook.remediation.unverifiedDeadline=20m"}, taint: api.CAStartupTaintKey}, // remediation off
	} {
		t.Run(strings.Join(tc.sets, ","), func(t *testing.T) {
			args := []string{"install", "notes", chart, "-n", "notes", "--dry-run=client"}
			for _, s := range tc.sets {
				args = append(args, "--set", s)
			}
			out, err := helm(t, args...)
			if err != nil {
				t.Fatalf("helm install --dry-run: %v\n%s", err, out)
			}
			_, notes, _ := strings.Cut(out, "NOTES:")
			if !strings.Contains(notes, "New nodes must start with the taint "+tc.taint+"=true:NoSchedule") {
				t.Errorf("notes do not name the startup taint %s:\n%s", tc.taint, notes)
			}
			if got := strings.Contains(notes, "WARNING: webhook.remediation.unverifiedDeadline="); got != tc.warn {
				t.Errorf("deadline warning in the notes: %v, want %v:\n%s", got, tc.warn, notes)
			}
		})
	}
}
