package api

import "testing"

// Each Event reason is listed once.
func TestEventReasonsOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range EventReasons() {
		if seen[r] || r == "" {
			t.Errorf("reason %q listed twice or empty", r)
		}
		seen[r] = true
	}
}
