package kubectlplugin

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
// printf: text read from the cluster (node names, taint keys, Event notes,
// condition messages, the cleanup status document's plugin text, flags of
// Deployments, API errors) may hold control characters or terminal escape
// sequences, which would move the cursor, recolour or rewrite the screen,
// or forge a line of the plugin's own. -o json and -o yaml escape them by
// their own rules.

// esc is s with every character that is not printable written as Go
// escapes it in a quoted string (\x1b, \n, \u202e; \xff for a byte that
// is not UTF-8); printable text, spaces among it, is unchanged.
func esc(s string) string {
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

// printf is fmt.Fprintf with each argument that is text (a string, a
// string type, a Stringer, an error, a []string) escaped by esc; the
// format, the plugin's own, is written as it is.
func printf(w io.Writer, format string, args ...any) {
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
		return esc(v)
	case []string:
		out := make([]string, len(v))
		for i, s := range v {
			out[i] = esc(s)
		}
		return out
	case error:
		return esc(v.Error())
	case fmt.Stringer:
		return esc(v.String())
	}
	if rv := reflect.ValueOf(a); rv.Kind() == reflect.String {
		return esc(rv.String())
	}
	return a
}

// sprintf is fmt.Sprintf with the arguments escaped as printf escapes them.
func sprintf(format string, args ...any) string {
	for i, a := range args {
		args[i] = escArg(a)
	}
	return fmt.Sprintf(format, args...)
}
