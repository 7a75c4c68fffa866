package doctor

import (
	"slices"
	"testing"
	"time"
)

func TestFlagValues(t *testing.T) {
	args := []string{"./cluster-autoscaler", "--v=4", "--startup-taint=a", "-startup-taint=b", "--startup-taint", "c",
		"-startup-taint", "d", "--startup-taints=no", "--status-taint=e", "--", "--startup-taint=after"}
	if got, want := FlagValues(args, "startup-taint"), []string{"a", "b", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("FlagValues = %q, want %q", got, want)
	}
	if v, ok := LastFlagValue(args, "status-taint"); !ok || v != "e" {
		t.Errorf("LastFlagValue(status-taint) = %q, %t", v, ok)
	}
	if _, ok := LastFlagValue(args, "max-node-startup-time"); ok {
		t.Error("LastFlagValue found a flag that is not there")
	}
	if got := FlagValues([]string{"--startup-taint"}, "startup-taint"); got != nil {
		t.Errorf("a flag without its value: %q", got)
	}
}

// TestParseClusterAutoscaler reads CA's flags in the forms its flag
// package takes: --flag=a,b, the flag repeated, --flag a, and the older
// --ignore-taint alias of --startup-taint.
func TestParseClusterAutoscaler(t *testing.T) {
	c, err := ParseClusterAutoscaler([]string{"--startup-taint=a,b", "--startup-taint", "c", "--ignore-taint=d",
		"--status-taint=e", "--status-taint=f,g", "--startup-taint-prefix=readiness.k8s.io/",
		"--max-node-provision-time=10m", "--max-node-startup-time", "20m", "--max-node-startup-time=25m"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "d"}; !slices.Equal(c.StartupTaints, want) {
		t.Errorf("StartupTaints = %q, want %q", c.StartupTaints, want)
	}
	if want := []string{"e", "f", "g"}; !slices.Equal(c.StatusTaints, want) {
		t.Errorf("StatusTaints = %q, want %q", c.StatusTaints, want)
	}
	if want := []string{"readiness.k8s.io/"}; !slices.Equal(c.StartupTaintPrefixes, want) {
		t.Errorf("StartupTaintPrefixes = %q", c.StartupTaintPrefixes)
	}
	if c.MaxNodeProvisionTime != 10*time.Minute || c.MaxNodeStartupTime != 25*time.Minute {
		t.Errorf("times = %s, %s; want 10m and the last of the two startup times, 25m", c.MaxNodeProvisionTime, c.MaxNodeStartupTime)
	}
	d, err := ParseClusterAutoscaler(nil)
	if err != nil || d.MaxNodeProvisionTime != DefaultMaxNodeTime || d.MaxNodeStartupTime != DefaultMaxNodeTime {
		t.Errorf("defaults: %+v, %v; want both times 15m", d, err)
	}
	if _, err := ParseClusterAutoscaler([]string{"--max-node-startup-time=soon"}); err == nil {
		t.Error("a bad duration was taken")
	}
}
