// Package flagenv gives every flag of a FlagSet an environment-variable twin,
// so the same option can come from a command line or a pod spec.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// Name is the environment variable twin of flag name under prefix:
// "check-period" with prefix "KNR" is KNR_CHECK_PERIOD.
func Name(prefix, name string) string {
	r := strings.NewReplacer("-", "_", ".", "_")
	return prefix + "_" + strings.ToUpper(r.Replace(name))
}

// Apply sets each flag of fs from its environment twin when that is set, and
// appends the twin's name to the flag's usage. Call it after defining the
// flags and before fs.Parse, so that a flag on the command line wins.
// aliases maps a flag name to extra variables read before the twin (such as
// NODE_NAME from the downward API).
func Apply(fs *flag.FlagSet, prefix string, aliases map[string][]string) error {
	var errs []string
	// Renamed flags' old variables first, so a flag's current variable
	// wins over its old one when both are set.
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if _, old := f.Value.(*alias); old {
			flags = append(flags, f)
		}
	})
	fs.VisitAll(func(f *flag.Flag) {
		if _, old := f.Value.(*alias); !old {
			flags = append(flags, f)
		}
	})
	for _, f := range flags {
		if f.Name == "version" {
			continue // a command, not configuration
		}
		names := append(append([]string(nil), aliases[f.Name]...), Name(prefix, f.Name))
		f.Usage += fmt.Sprintf(" (env %s)", strings.Join(names, ", "))
		for _, env := range names {
			v, ok := os.LookupEnv(env)
			if !ok {
				continue
			}
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Sprintf("invalid value %q for %s (flag --%s): %v", v, env, f.Name, err))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// StringList is a comma-separated list flag; an empty string is an empty list.
type StringList []string

// String implements flag.Value.
func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set implements flag.Value; it replaces the list.
func (l *StringList) Set(s string) error {
	*l = nil
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// OptionalDuration is a duration flag that is off until it is given, so a
// given zero or negative value can be refused rather than read as "off".
type OptionalDuration struct {
	// D is the value; meaningful only when IsSet.
	D time.Duration
	// IsSet says whether the flag (or its environment twin) was given.
	IsSet bool
}

// String implements flag.Value.
func (d *OptionalDuration) String() string {
	if d == nil || !d.IsSet {
		return ""
	}
	return d.D.String()
}

// Set implements flag.Value.
func (d *OptionalDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.D, d.IsSet = v, true
	return nil
}
