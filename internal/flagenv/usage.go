package flagenv

import "strings"

// SplitUsage undoes what Apply appends to a flag's usage: it returns the
// usage as the flag defined it and the environment variables that set the
// flag, in the order Apply reads them (the last one set wins). A usage
// Apply did not touch comes back whole, with no variables. The flag tables
// of the documentation are generated with it from the binaries' own flags.
func SplitUsage(usage string) (text string, env []string) {
	i := strings.LastIndex(usage, " (env ")
	if i < 0 || !strings.HasSuffix(usage, ")") {
		return usage, nil
	}
	return usage[:i], strings.Split(usage[i+len(" (env "):len(usage)-1], ", ")
}
