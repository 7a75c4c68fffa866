package cli

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

type opts struct {
	level string
}

func (o *opts) Parse(fs *flag.FlagSet, args []string) error {
	fs.StringVar(&o.level, "level", "info", "log level")
	return fs.Parse(args)
}

func (o *opts) Validate() error {
	if o.level != "info" && o.level != "debug" {
		return errors.New("--level: want info or debug, got " + o.level)
	}
	return nil
}

func TestParse(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		want       int
		wantOut    string
		wantErrOut string
	}{
		{name: "valid: go on", args: []string{"--level=debug"}, want: Continue},
		{name: "version", args: []string{"--version"}, want: 0, wantOut: "tool"},
		{name: "help", args: []string{"--help"}, want: 0},
		{name: "unknown flag", args: []string{"--colour"}, want: 2, wantErrOut: "tool: flag provided but not defined: -colour"},
		{name: "invalid value names the flag", args: []string{"--level=loud"}, want: 2, wantErrOut: "tool: invalid configuration:\n--level: want info or debug, got loud"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			fs := flag.NewFlagSet("tool", flag.ContinueOnError)
			fs.SetOutput(&bytes.Buffer{})
			got := Parse("tool", fs, &opts{}, tt.args, &out, &errOut)
			if got != tt.want {
				t.Errorf("Parse = %d, want %d (stderr %q)", got, tt.want, errOut.String())
			}
			if !strings.Contains(out.String(), tt.wantOut) || !strings.Contains(errOut.String(), tt.wantErrOut) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", out.String(), errOut.String(), tt.wantOut, tt.wantErrOut)
			}
		})
	}
}
