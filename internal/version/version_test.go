package version

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(BuildInfo("x_build_info", "Build of x; always 1."))
	want := `# HELP x_build_info Build of x; always 1.
# TYPE x_build_info gauge
x_build_info{commit="` + Commit + `",goversion="` + runtime.Version() + `",version="` + Version + `"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "x_build_info"); err != nil {
		t.Error(err)
	}
}
