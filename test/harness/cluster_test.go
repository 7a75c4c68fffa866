package harness

import (
	"fmt"
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

// TestInotifyLimitPerSlot: the kernel's default limit, 128, holds the
// default two slots and not four; the error names the sysctl and the value
// that would do.
func TestInotifyLimitPerSlot(t *testing.T) {
	for _, tc := range []struct {
		name        string
		slots, have int
		ok          bool
	}{
		{"two slots, the kernel's default", 2, 128, true},
		{"four slots, the kernel's default", 4, 128, false},
		{"four slots, raised by make e2e", 4, 256, true},
		{"one slot, a host that lowered it", 1, 63, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := inotifyEnough(tc.slots, tc.have)
			if (err == nil) != tc.ok {
				t.Fatalf("inotifyEnough(%d, %d) = %v, want ok %v", tc.slots, tc.have, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("sysctl -w fs.inotify.max_user_instances=%d", tc.slots*inotifyPerCluster)) {
				t.Errorf("error %q does not name the sysctl that would do", err)
			}
		})
	}
}
