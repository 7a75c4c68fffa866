// Command chartdoc rewrites the values table of charts/kube-node-ready/README.md
// from the "# --" comments of values.yaml. `make chart-docs` runs it; the chart
// test fails when a value is missing from the table.
package main

import (
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

var (
	commentRe = regexp.MustCompile(`^\s*# -- (.*)$`)
	keyRe     = regexp.MustCompile(`^(\s*)([A-Za-z][A-Za-z0-9-]*):`)
)

const marker = "## Values\n"

func main() {
	dir := "charts/kube-node-ready"
	raw, err := os.ReadFile(dir + "/values.yaml")
	if err != nil {
		log.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		log.Fatal(err)
	}
	var rows []string
	var stack []string
	comment := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if m := commentRe.FindStringSubmatch(line); m != nil {
			comment = m[1]
			continue
		}
		m := keyRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		depth := len(m[1]) / 2
		if depth > len(stack) {
			continue // inside a flow or list value
		}
		stack = append(stack[:depth], m[2])
		if comment == "" {
			continue
		}
		rows = append(rows, fmt.Sprintf("| `%s` | `%s` | %s |", strings.Join(stack, "."), render(lookup(values, stack)), comment))
		comment = ""
	}
	readme, err := os.ReadFile(dir + "/README.md")
	if err != nil {
		log.Fatal(err)
	}
	head, _, ok := strings.Cut(string(readme), marker)
	if !ok {
		log.Fatalf("%s/README.md has no %q heading", dir, strings.TrimSpace(marker))
	}
	table := "| value | default | meaning |\n| --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n"
	if err := os.WriteFile(dir+"/README.md", []byte(head+marker+"\n"+table), 0o644); err != nil {
		log.Fatal(err)
	}
}

func lookup(m map[string]any, path []string) any {
	var v any = m
	for _, k := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func render(v any) string {
	var s string
	switch v := v.(type) {
	case string:
		s = v
		if s == "" {
			s = `""`
		}
	case map[string]any, []any:
		b, _ := yaml.Marshal(v)
		s = strings.Join(strings.Fields(strings.ReplaceAll(string(b), "\n", " ")), " ")
	default:
		s = fmt.Sprint(v)
	}
	s = strings.ReplaceAll(s, "|", `\|`)
	if len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}
