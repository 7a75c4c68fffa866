package flagenv

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestEnvTwinsAndPrecedence(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantPeriod time.Duration
		wantNode   string
		wantList   []string
		wantErr    string
	}{
		{name: "defaults", wantPeriod: time.Minute, wantList: []string{"a", "b"}},
		{name: "env twin", env: map[string]string{"KNR_CHECK_PERIOD": "5s"}, wantPeriod: 5 * time.Second, wantList: []string{"a", "b"}},
		{name: "flag beats env", env: map[string]string{"KNR_CHECK_PERIOD": "5s"}, args: []string{"--check-period=7s"}, wantPeriod: 7 * time.Second, wantList: []string{"a", "b"}},
		{name: "alias", env: map[string]string{"NODE_NAME": "n1"}, wantPeriod: time.Minute, wantNode: "n1", wantList: []string{"a", "b"}},
		{name: "twin beats alias", env: map[string]string{"NODE_NAME": "n1", "KNR_NODE_NAME": "n2"}, wantPeriod: time.Minute, wantNode: "n2", wantList: []string{"a", "b"}},
		{name: "empty list", env: map[string]string{"KNR_NAMES": ""}, wantPeriod: time.Minute},
		{name: "bad env value names variable and flag", env: map[string]string{"KNR_CHECK_PERIOD": "soon"}, wantErr: "KNR_CHECK_PERIOD (flag --check-period)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			period := fs.Duration("check-period", time.Minute, "how often")
			node := fs.String("node-name", "", "node")
			list := StringList{"a", "b"}
			fs.Var(&list, "names", "names")
			err := Apply(fs, "KNR", map[string][]string{"node-name": {"NODE_NAME"}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if *period != tt.wantPeriod || *node != tt.wantNode || !reflect.DeepEqual([]string(list), tt.wantList) {
				t.Errorf("got period=%s node=%q list=%q", *period, *node, list)
			}
			if u := fs.Lookup("node-name").Usage; !strings.Contains(u, "env NODE_NAME, KNR_NODE_NAME") {
				t.Errorf("usage %q does not name the env twins", u)
			}
		})
	}
}
