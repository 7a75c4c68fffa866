// Package eventnote fits Event notes within the API server's limit, and
// other texts made of errors within theirs. Both binaries put errors into
// notes, and an error can be any length: an Event whose note is too long is
// refused and never seen.
package eventnote

import (
	"strings"
	"unicode/utf8"
)

// MaxBytes is the API server's limit on the note of an events.k8s.io/v1
// Event.
const MaxBytes = 1024

// Shorten returns s cut to at most MaxBytes, ending in "..." when cut (Cut).
func Shorten(s string) string { return Cut(s, MaxBytes) }

// Cut returns s cut to at most max bytes, ending in "..." when cut. It cuts
// on a rune boundary and replaces invalid UTF-8 first: a split or invalid
// byte would be encoded as U+FFFD, longer than what it replaces, and could
// push the text over the limit again.
func Cut(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
