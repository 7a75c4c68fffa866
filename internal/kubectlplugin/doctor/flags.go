package doctor

import (
	"fmt"
	"strings"
	"time"
)

// FlagValues are the values a command line gives the flag name, in order,
// in every form Go's flag package and pflag read: --name=v, -name=v,
// --name v and -name v. Parsing stops at "--", as those packages stop.
// Only flags that take a value may be asked for: a following argument is
// taken as the value.
func FlagValues(args []string, name string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		flag, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !strings.HasPrefix(a, "-") || flag != name {
			continue
		}
		if !hasValue {
			if i+1 == len(args) {
				continue
			}
			i++
			value = args[i]
		}
		out = append(out, value)
	}
	return out
}

// LastFlagValue is the value the flag takes: its last occurrence, as Go's
// flag package keeps it; ok is false when the command line lacks it.
func LastFlagValue(args []string, name string) (value string, ok bool) {
	vs := FlagValues(args, name)
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// listFlag is every value of a list flag of Cluster Autoscaler's: the flag
// repeated, each occurrence also split at commas (no taint key holds one).
func listFlag(args []string, names ...string) []string {
	var out []string
	for _, name := range names {
		for _, v := range FlagValues(args, name) {
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// ParseClusterAutoscaler reads the flags of a Cluster Autoscaler's command
// line (its container's command and args joined) that decide how it treats
// our taints. An unset duration is CA's default.
func ParseClusterAutoscaler(args []string) (ClusterAutoscaler, error) {
	c := ClusterAutoscaler{
		StartupTaints:        listFlag(args, "startup-taint", "ignore-taint"),
		StatusTaints:         listFlag(args, "status-taint"),
		StartupTaintPrefixes: listFlag(args, "startup-taint-prefix"),
		MaxNodeProvisionTime: DefaultMaxNodeTime,
		MaxNodeStartupTime:   DefaultMaxNodeTime,
	}
	for name, d := range map[string]*time.Duration{
		"max-node-provision-time": &c.MaxNodeProvisionTime,
		"max-node-startup-time":   &c.MaxNodeStartupTime,
	} {
		v, ok := LastFlagValue(args, name)
		if !ok {
			continue
		}
		parsed, err := time.ParseDuration(v)
		if err != nil {
			return c, fmt.Errorf("--%s=%s: %w", name, v, err)
		}
		*d = parsed
	}
	return c, nil
}
