package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/app"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
	webhookapp "github.com/kube-node-ready/kube-node-ready/internal/webhook/app"
)

// binary is one command whose flags the documentation lists.
type binary struct {
	name string
	// options returns the binary's options with their defaults; their Parse
	// is what the binary runs, so the table shows what --help shows.
	options func() cli.Options
}

func binaries() []binary {
	return []binary{
		{name: "kube-node-ready-agent", options: func() cli.Options { return app.NewOptions() }},
		{name: "kube-node-ready-webhook", options: func() cli.Options { return webhookapp.NewOptions() }},
	}
}

// flags returns b's flags as its --help lists them (sorted by name), with
// the environment twins its Parse gives them.
func flags(b binary) ([]*flag.Flag, error) {
	fs := flag.NewFlagSet(b.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := b.options().Parse(fs, nil); err != nil {
		return nil, fmt.Errorf("%s: parse no arguments: %w", b.name, err)
	}
	var out []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { out = append(out, f) })
	return out, nil
}

// A table starts with <!-- flags BINARY --> or <!-- flags BINARY a,b,c -->
// and ends with <!-- end flags -->. A table that lists flags holds those;
// the one table of a binary without a list holds every other flag, so a new
// flag always appears somewhere.
var beginRe = regexp.MustCompile(`(?m)^<!-- flags ([a-z-]+)(?: ([a-z0-9.,-]+))? -->\n`)

const endMarker = "<!-- end flags -->"

type table struct {
	file, binary string
	only         []string
	// start and end delimit the table's body in the file's text.
	start, end int
}

// Generate rewrites every flag table of docs (file name → text) from the
// binaries' flags (binary name → flags) and returns the new texts.
func Generate(docs map[string]string, flagsOf map[string][]*flag.Flag) (map[string]string, error) {
	files := make([]string, 0, len(docs))
	for f := range docs {
		files = append(files, f)
	}
	sort.Strings(files)
	var tables []table
	for _, f := range files {
		text := docs[f]
		for _, m := range beginRe.FindAllStringSubmatchIndex(text, -1) {
			t := table{file: f, binary: text[m[2]:m[3]], start: m[1]}
			if m[4] >= 0 {
				t.only = strings.Split(text[m[4]:m[5]], ",")
			}
			end := strings.Index(text[t.start:], endMarker)
			if end < 0 {
				return nil, fmt.Errorf("%s: %q has no %q after it", f, strings.TrimSpace(text[m[0]:m[1]]), endMarker)
			}
			t.end = t.start + end
			tables = append(tables, t)
		}
	}
	rows := map[*table][]*flag.Flag{}
	for name, fl := range flagsOf {
		byName := map[string]*flag.Flag{}
		for _, f := range fl {
			byName[f.Name] = f
		}
		placed := map[string]string{}
		var rest []*table
		for i := range tables {
			t := &tables[i]
			if t.binary != name {
				continue
			}
			if t.only == nil {
				rest = append(rest, t)
				continue
			}
			for _, n := range t.only {
				f, ok := byName[n]
				if !ok {
					return nil, fmt.Errorf("%s: the flag table of %s lists --%s, which %s does not have", t.file, name, n, name)
				}
				if where, ok := placed[n]; ok {
					return nil, fmt.Errorf("%s: the flag table of %s lists --%s, already listed in %s", t.file, name, n, where)
				}
				placed[n] = t.file
				rows[t] = append(rows[t], f)
			}
		}
		if len(rest) != 1 {
			return nil, fmt.Errorf("%s: %d flag tables without a list of flags, want one (<!-- flags %s -->) for the flags no other table lists", name, len(rest), name)
		}
		for _, f := range fl {
			if _, ok := placed[f.Name]; !ok {
				rows[rest[0]] = append(rows[rest[0]], f)
			}
		}
	}
	for _, t := range tables {
		if _, ok := flagsOf[t.binary]; !ok {
			return nil, fmt.Errorf("%s: a flag table of %s, which is not a binary with documented flags", t.file, t.binary)
		}
	}
	out := map[string]string{}
	for _, f := range files {
		text, next := docs[f], 0
		var b strings.Builder
		for i := range tables {
			t := &tables[i]
			if t.file != f {
				continue
			}
			b.WriteString(text[next:t.start])
			// Blank lines around the table keep it a table in any Markdown.
			b.WriteString("\n" + render(rows[t]) + "\n")
			next = t.end
		}
		b.WriteString(text[next:])
		out[f] = b.String()
	}
	return out, nil
}

// render is one table: flag, environment variables, default, meaning.
func render(fl []*flag.Flag) string {
	fl = slices.Clone(fl)
	slices.SortFunc(fl, func(a, b *flag.Flag) int { return strings.Compare(a.Name, b.Name) })
	var b strings.Builder
	b.WriteString("| flag | environment | default | meaning |\n| --- | --- | --- | --- |\n")
	for _, f := range fl {
		usage, env := flagenv.SplitUsage(f.Usage)
		for i, e := range env {
			env[i] = "`" + e + "`"
		}
		def := "—"
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", f.Name, strings.Join(env, ", "), cell(def), cell(usage))
	}
	return b.String()
}

// cell keeps a value inside its table cell.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}
