package version

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// semver is the version form releases use: x.y.z, optionally a pre-release.
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// TestChartCarriesVERSION fails when the chart's version or appVersion drift
// from the VERSION file: `make release` stamps the binaries, images and
// kubectl plugin with VERSION, and the chart's appVersion is the image tag
// it installs, so a release with the two apart would install other images.
func TestChartCarriesVERSION(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(string(b))
	if !semver.MatchString(want) {
		t.Fatalf("VERSION file holds %q, want a semantic version x.y.z", want)
	}
	b, err = os.ReadFile("../../charts/kube-node-ready/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatalf("Chart.yaml: %v", err)
	}
	if chart.Version != want || chart.AppVersion != want {
		t.Errorf("Chart.yaml has version %q, appVersion %q; the VERSION file says %s: set both to it", chart.Version, chart.AppVersion, want)
	}
}
