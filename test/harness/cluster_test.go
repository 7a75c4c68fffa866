package harness

import (
	"os"
	"strings"
	"testing"
)

// TestRealNodeHostNamesWhatIsMissing: with none of the node tools on PATH,
// the check names each one (ip6tables too for IPv6 nodes) and says how to
// get them.
func TestRealNodeHostNamesWhatIsMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := checkRealNodeHost(true)
	if err == nil {
		t.Fatal("no error with an empty PATH")
	}
	msg := err.Error()
	if os.Geteuid() != 0 {
		// Without root nothing else can work; that is what is reported.
		if !strings.Contains(msg, "need root") {
			t.Errorf("error %q does not say root is needed", msg)
		}
		return
	}
	for _, want := range []string{"nsenter", "iptables", "ip6tables", "conntrack", "runc", "make tools"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
}
