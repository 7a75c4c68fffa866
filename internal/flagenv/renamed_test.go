package flagenv

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRenamed(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantKey   string
		wantOn    bool
		wantWarns int
		wantErr   string
	}{
		{name: "new name", args: []string{"--startup-taint=a/b=true:NoSchedule"}, wantKey: "a/b=true:NoSchedule"},
		{name: "old name converted", args: []string{"--old-taint=a/b"}, wantKey: "a/b=true:NoSchedule", wantWarns: 1},
		{name: "old env twin", env: map[string]string{"KNR_OLD_TAINT": "c/d"}, wantKey: "c/d=true:NoSchedule", wantWarns: 1},
		{name: "old bool without value", args: []string{"--old-on"}, wantKey: "x=true:NoSchedule", wantOn: true, wantWarns: 1},
		{name: "new flag on the command line beats the old env twin", env: map[string]string{"KNR_OLD_TAINT": "c/d"}, args: []string{"--startup-taint=e/f=1:NoExecute"}, wantKey: "e/f=1:NoExecute", wantWarns: 1},
		{name: "new env twin beats the old one", env: map[string]string{"KNR_OLD_TAINT": "c/d", "KNR_STARTUP_TAINT": "e/f=1:NoExecute"}, wantKey: "e/f=1:NoExecute", wantWarns: 1},
		{name: "new env twin beats the old one, whatever the names' order", env: map[string]string{"KNR_ZOLD_TAINT": "c/d", "KNR_STARTUP_TAINT": "e/f=1:NoExecute"}, wantKey: "e/f=1:NoExecute", wantWarns: 1},
		{name: "bad old value names the old flag", args: []string{"--old-taint="}, wantErr: "old-taint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			key := fs.String("startup-taint", "x=true:NoSchedule", "taint")
			on := fs.Bool("on", false, "on")
			r := AddRenamed(fs, []Renamed{
				{Old: "old-taint", New: "startup-taint", Convert: func(s string) (string, error) {
					if s == "" {
						return "", errEmpty
					}
					return s + "=true:NoSchedule", nil
				}},
				{Old: "old-on", New: "on"},
				{Old: "zold-taint", New: "startup-taint", Convert: func(s string) (string, error) { return s + "=true:NoSchedule", nil }},
			})
			if err := Apply(fs, "KNR", nil); err != nil {
				t.Fatal(err)
			}
			err := fs.Parse(tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to name %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *key != tt.wantKey || *on != tt.wantOn {
				t.Errorf("startup-taint=%q on=%v, want %q %v", *key, *on, tt.wantKey, tt.wantOn)
			}
			if w := r.Warnings(); len(w) != tt.wantWarns {
				t.Errorf("warnings %q, want %d", w, tt.wantWarns)
			} else if len(w) == 1 && !strings.Contains(w[0], "use --") {
				t.Errorf("warning %q does not name the new flag", w[0])
			}
			if u := fs.Lookup("old-taint").Usage; !strings.Contains(u, "deprecated: use --startup-taint") {
				t.Errorf("usage of the old flag %q", u)
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

const errEmpty = errString("empty")
