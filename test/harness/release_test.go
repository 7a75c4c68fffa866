package harness

import (
	"strings"
	"testing"
)

func TestLastEntry(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"commit after comments", "# the release\n# more\n56c370c\n", "56c370c"},
		{"the last entry wins", "abc\n# moved on\ndef\n\n", "def"},
		{"indented and trailing spaces", "  # c\n  v0.1.0  \n", "v0.1.0"},
		{"comments only", "# nothing yet\n\n", ""},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lastEntry(strings.NewReader(tc.in))
			if err != nil || got != tc.want {
				t.Errorf("lastEntry(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
