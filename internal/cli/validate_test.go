package cli

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseTaint(t *testing.T) {
	tests := []struct {
		in      string
		want    corev1.Taint
		wantErr string
	}{
		{in: "node-ready/unverified=true:NoSchedule", want: corev1.Taint{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		{in: "example.com/x:NoExecute", want: corev1.Taint{Key: "example.com/x", Effect: corev1.TaintEffectNoExecute}},
		{in: "node-ready/unverified", wantErr: "want key=value:Effect"},
		{in: "node-ready/unverified=true:Sometimes", wantErr: "effect must be"},
		{in: "bad key=true:NoSchedule", wantErr: "key:"},
		{in: "k=bad value:NoSchedule", wantErr: "value:"},
	}
	for _, tt := range tests {
		got, err := ParseTaint(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseTaint(%q) err = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseTaint(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestProblemsOneForm(t *testing.T) {
	var p Problems
	if p.Err() != nil {
		t.Fatal("no problems, but an error")
	}
	p.Add("log-level", "%v", LogLevel("loud"))
	p.Check("verified-label", QualifiedName("not a name"))
	p.Check("startup-taint", nil)
	err := p.Err()
	if err == nil {
		t.Fatal("want an error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "--log-level: ") || !strings.HasPrefix(lines[1], "--verified-label: ") {
		t.Errorf("problems %q: want one line per flag, each starting --flag:", lines)
	}
}
