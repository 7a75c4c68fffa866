package text

import "testing"

func TestEsc(t *testing.T) {
	for in, want := range map[string]string{
		"ip-10-0-1-7":                "ip-10-0-1-7",
		"dns: no A record, 3 tries":  "dns: no A record, 3 tries",
		"naïve ünïcode ✓":            "naïve ünïcode ✓",
		"\x1b[31mred\x1b[0m":         `\x1b[31mred\x1b[0m`,
		"line\nfix: rm -rf /\r":      `line\nfix: rm -rf /\r`,
		"tab\there\a":                `tab\there\a`,
		"right\u202eto left":         `right\u202eto left`,
		"bad \xff byte":              `bad \xff byte`,
		"\x1b]0;title\x07 osc title": `\x1b]0;title\a osc title`,
	} {
		if got := Esc(in); got != want {
			t.Errorf("Esc(%q) = %q, want %q", in, got, want)
		}
	}
}
