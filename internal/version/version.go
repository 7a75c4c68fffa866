// Package version carries the build identity stamped in by -ldflags.
package version

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// These are overwritten at link time by the Makefile, e.g.
// -ldflags "-X github.com/kube-node-ready/kube-node-ready/internal/version.Version=0.1.0":
// Version comes from the VERSION file at the repository root, the one version
// the chart, the images and the kubectl plugin carry too.
var (
	// Version is the release the binary was built from.
	Version = "dev"
	// Commit is the git commit the binary was built from.
	Commit = "unknown"
)

// String renders the build identity for --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, %s, %s/%s)", binary, Version, Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// BuildInfo is the gauge name{version,commit,goversion}, always 1: both
// binaries export one so a dashboard can tell which build each pod runs.
func BuildInfo(name, help string) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        name,
		Help:        help,
		ConstLabels: prometheus.Labels{"version": Version, "commit": Commit, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}
