// Command flagdoc rewrites the flag tables of README.md and docs/*.md from
// the agent's and the webhook's own flags: names, environment twins,
// defaults and usage as --help prints them. `make flag-docs` runs it from
// the repository root; its test fails when a table drifts from the flags.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

func main() {
	docs, err := readDocs(".")
	if err != nil {
		log.Fatal(err)
	}
	flagsOf := map[string][]*flag.Flag{}
	for _, b := range binaries() {
		if flagsOf[b.name], err = flags(b); err != nil {
			log.Fatal(err)
		}
	}
	out, err := Generate(docs, flagsOf)
	if err != nil {
		log.Fatal(err)
	}
	for f, text := range out {
		if text == docs[f] {
			continue
		}
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
		fmt.Println("rewrote", f)
	}
}

// readDocs reads README.md and docs/*.md under root, keyed by their path
// relative to it.
func readDocs(root string) (map[string]string, error) {
	names, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	names = append(names, filepath.Join(root, "README.md"))
	docs := map[string]string{}
	for _, n := range names {
		raw, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		rel, err := filepath.Rel(root, n)
		if err != nil {
			return nil, err
		}
		docs[filepath.ToSlash(rel)] = string(raw)
	}
	return docs, nil
}
