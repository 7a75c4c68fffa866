package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagTablesMatchBinaries regenerates the flag tables of README.md and
// docs/*.md from the agent's and the webhook's flags and fails when a
// committed table differs: a flag added, renamed, re-defaulted or
// re-described without `make flag-docs`.
func TestFlagTablesMatchBinaries(t *testing.T) {
	docs, err := readDocs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	flagsOf := map[string][]*flag.Flag{}
	for _, b := range binaries() {
		if flagsOf[b.name], err = flags(b); err != nil {
			t.Fatal(err)
		}
		if len(flagsOf[b.name]) < 20 {
			t.Fatalf("%s has %d flags; the options were not registered", b.name, len(flagsOf[b.name]))
		}
	}
	out, err := Generate(docs, flagsOf)
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for f, text := range out {
		for _, table := range strings.Split(text, "<!-- flags ")[1:] {
			table, _, _ = strings.Cut(table, endMarker)
			rows += strings.Count(table, "\n| `--")
		}
		if text != docs[f] {
			t.Errorf("%s: a flag table differs from the binaries' flags; run `make flag-docs`\n%s", f, firstDifference(docs[f], text))
		}
	}
	want := 0
	for _, fl := range flagsOf {
		want += len(fl)
	}
	if rows != want {
		t.Errorf("the documents hold %d flag rows, the binaries have %d flags", rows, want)
	}
}

// firstDifference shows the first line where got and want differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  committed: %s\n  generated: %s", i+1, gl, wl)
		}
	}
	return ""
}

func testFlags() map[string][]*flag.Flag {
	fs := flag.NewFlagSet("bin", flag.ContinueOnError)
	fs.String("alpha", "a|b", "first (env KNR_ALPHA)")
	fs.Int("beta", 0, "second (env BETA, KNR_BETA)")
	fs.String("gamma", "", "third")
	var fl []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { fl = append(fl, f) })
	return map[string][]*flag.Flag{"bin": fl}
}

func TestGenerate(t *testing.T) {
	docs := map[string]string{
		"a.md": "# A\n\n<!-- flags bin -->\nstale\n<!-- end flags -->\n\nafter\n",
		"b.md": "<!-- flags bin gamma,beta -->\n<!-- end flags -->\n",
		"c.md": "no tables\n",
	}
	out, err := Generate(docs, testFlags())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"a.md": "# A\n\n<!-- flags bin -->\n\n| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n" +
			"| `--alpha` | `KNR_ALPHA` | `a\\|b` | first |\n\n<!-- end flags -->\n\nafter\n",
		"b.md": "<!-- flags bin gamma,beta -->\n\n| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n" +
			"| `--beta` | `BETA`, `KNR_BETA` | `0` | second |\n| `--gamma` |  | — | third |\n\n<!-- end flags -->\n",
		"c.md": "no tables\n",
	}
	for f, w := range want {
		if out[f] != w {
			t.Errorf("%s:\n%s\nwant:\n%s", f, out[f], w)
		}
	}
}

func TestGenerateRefusesTablesThatMissOrRepeatFlags(t *testing.T) {
	tests := []struct {
		name string
		docs map[string]string
		want string
	}{
		{name: "unknown flag", docs: map[string]string{"a.md": "<!-- flags bin -->\n<!-- end flags -->\n<!-- flags bin delta -->\n<!-- end flags -->\n"}, want: "lists --delta, which bin does not have"},
		{name: "flag in two tables", docs: map[string]string{"a.md": "<!-- flags bin -->\n<!-- end flags -->\n<!-- flags bin beta -->\n<!-- end flags -->\n", "b.md": "<!-- flags bin beta -->\n<!-- end flags -->\n"}, want: "--beta, already listed in a.md"},
		{name: "no table for the rest", docs: map[string]string{"a.md": "<!-- flags bin beta -->\n<!-- end flags -->\n"}, want: "0 flag tables without a list"},
		{name: "two tables for the rest", docs: map[string]string{"a.md": "<!-- flags bin -->\n<!-- end flags -->\n", "b.md": "<!-- flags bin -->\n<!-- end flags -->\n"}, want: "2 flag tables without a list"},
		{name: "no end", docs: map[string]string{"a.md": "<!-- flags bin -->\n"}, want: "has no \"<!-- end flags -->\""},
		{name: "unknown binary", docs: map[string]string{"a.md": "<!-- flags bin -->\n<!-- end flags -->\n<!-- flags other -->\n<!-- end flags -->\n"}, want: "a flag table of other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate(tt.docs, testFlags())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Generate: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
