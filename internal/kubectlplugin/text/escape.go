package text

import (
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Everything the plugin prints for a person passes its values through
// Printf: text read from the cluster (node names, taint keys, Event notes,
// condition messages, the cleanup status document's plugin text, flags of
// Deployments, API errors) may hold control characters or terminal escape
// sequences, which would move the cursor, recolour or rewrite the screen,
// or forge a line of the plugin's own. -o json and -o yaml escape them by
// their own rules.

// Esc is s with every character that is not printable written as Go
// escapes it in a quoted string (\x1b, \n, \u202e; \xff for a byte that
// is not UTF-8); printable text, spaces among it, is unchanged.
func Esc(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// Printf is fmt.Fprintf with each argument that is text (a string, a
// string type, a Stringer, an error, a []string) escaped by Esc; the
// format, the plugin's own, is written as it is.
func Printf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		args[i] = escArg(a)
	}
	fmt.Fprintf(w, format, args...)
}

func escArg(a any) any {
	switch v := a.(type) {
	case nil:
		return nil
	case string:
		return Esc(v)
	case []string:
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = Esc(s)
		}
		return out
	case error:
		return Esc(v.Error())
	case fmt.Stringer:
		return Esc(v.String())
	}
	if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
		return Esc(rv.String())
	}
	return a
}

// Sprintf is fmt.Sprintf with the arguments escaped as Printf escapes them.
func Sprintf(format string, args ...any) string {
	for i, a := range args {
		args[i] = escArg(a)
	}
	return fmt.Sprintf(format, args...)
}
