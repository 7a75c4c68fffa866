package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestReplaceRow(t *testing.T) {
	doc := "# B\n\n" + beginMarker + "\n| run | old header |\n| --- | --- |\n| warm | `a` | old warm |\n| cold | `b` | old cold |\n" + endMarker + "\n\nafter\n"
	for _, tt := range []struct {
		name, mode, row string
		want            []string
	}{
		{"warm replaced, cold kept and first", "warm", "| warm | `c` | new |", []string{"| cold | `b` | old cold |", "| warm | `c` | new |"}},
		{"cold replaced", "cold", "| cold (`make build`) | `c` | new |", []string{"| cold (`make build`) | `c` | new |", "| warm | `a` | old warm |"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := replaceRow(doc, tt.mode, tt.row)
			if err != nil {
				t.Fatal(err)
			}
			want := "# B\n\n" + beginMarker + "\n" + header + "\n" + strings.Join(tt.want, "\n") + "\n" + endMarker + "\n\nafter\n"
			if got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
	if _, err := replaceRow("no table", "warm", "| warm |"); err == nil {
		t.Error("a document without the markers: no error")
	}
}

// TestDocHasTheTable: the table this command writes is in docs/benchmarks.md.
func TestDocHasTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	got, err := replaceRow(string(b), "warm", "| warm |")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, header) {
		t.Error("the rewritten table lacks the header")
	}
}

func TestMachineParts(t *testing.T) {
	for in, want := range map[string]string{
		"Intel(R) Xeon(R) Processor":               "Intel Xeon",
		"AMD EPYC 7B13 64-Core Processor":          "AMD EPYC 7B13 64-Core",
		"Intel(R) Core(TM) i7-8650U CPU @ 1.90GHz": "Intel Core i7-8650U",
	} {
		if got := cpuName(in); got != want {
			t.Errorf("cpuName(%q) = %q, want %q", in, got, want)
		}
	}
	osr := "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n"
	if got := osRelease(osr); got != "Debian 12" {
		t.Errorf("osRelease = %q, want Debian 12", got)
	}
	if got := minutes(15*time.Minute + 17*time.Second + 300*time.Millisecond); got != "15 min 17 s" {
		t.Errorf("minutes = %q", got)
	}
}
