package flagenv

import (
	"flag"
	"io"
	"reflect"
	"testing"
)

// TestSplitUsageUndoesApply: the usage and variables SplitUsage reads back
// are the ones Apply was given, so generated flag tables name every twin.
func TestSplitUsageUndoesApply(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.String("node-name", "", "the node (required)")
	fs.String("check.dns.names", "a", "names (comma-separated)")
	fs.Bool("version", false, "print the version")
	if err := Apply(fs, "KNR", map[string][]string{"node-name": {"NODE_NAME"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		flag, usage string
		env         []string
	}{
		{flag: "node-name", usage: "the node (required)", env: []string{"NODE_NAME", "KNR_NODE_NAME"}},
		{flag: "check.dns.names", usage: "names (comma-separated)", env: []string{"KNR_CHECK_DNS_NAMES"}},
		{flag: "version", usage: "print the version"},
	}
	for _, tt := range tests {
		t.Run(tt.flag, func(t *testing.T) {
			usage, env := SplitUsage(fs.Lookup(tt.flag).Usage)
			if usage != tt.usage || !reflect.DeepEqual(env, tt.env) {
				t.Errorf("SplitUsage(%q) = %q, %q; want %q, %q", fs.Lookup(tt.flag).Usage, usage, env, tt.usage, tt.env)
			}
		})
	}
}
