// Package doclinks checks the relative links of the project's Markdown
// documents: every linked file must exist and every #anchor must name a
// heading of its target, as GitHub renders it. Its test runs over README.md,
// docs/*.md and the chart's and manifests' READMEs in `make unit`, so a
// section moved or renamed cannot leave a dead link behind.
package doclinks

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	// linkRe matches the target of an inline link or image, [text](target);
	// the text may span lines, so only the "](" and the target are matched.
	linkRe = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpanRe matches inline code, whose brackets are not links.
	codeSpanRe = regexp.MustCompile("`[^`\n]*`")
	headingRe  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// Link is one relative link found in a document.
type Link struct {
	// File is the document, Line the line of the link's target (1-based).
	File string
	Line int
	// Target is the link as written: a path, a path#anchor or an #anchor.
	Target string
}

// prose returns the lines of a Markdown document with fenced code blocks
// blanked, so line numbers still match.
func prose(text string) []string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		switch {
		case fence == "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			fence = trimmed[:3]
			lines[i] = ""
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			lines[i] = ""
		}
	}
	return lines
}

// Links returns the relative links of the document text (external URLs and
// mailto: left out).
func Links(file, text string) []Link {
	var links []Link
	for i, l := range prose(text) {
		// Brackets in inline code are not links.
		l = codeSpanRe.ReplaceAllString(l, "")
		for _, m := range linkRe.FindAllStringSubmatch(l, -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			links = append(links, Link{File: file, Line: i + 1, Target: t})
		}
	}
	return links
}

// Anchors returns the anchors GitHub gives the headings of a Markdown
// document: lower case, punctuation dropped, spaces as dashes, a repeated
// one suffixed -1, -2, ...
func Anchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := headingRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := Slug(m[1])
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

// Slug is GitHub's anchor of one heading's text.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// Check reads the documents (paths relative to root) and returns one
// problem per broken link, plus how many links it checked.
func Check(root string, files []string) (problems []string, checked int, err error) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) (map[string]bool, error) {
		if a, ok := anchorsOf[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchorsOf[path] = Anchors(string(raw))
		return anchorsOf[path], nil
	}
	for _, f := range files {
		raw, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, 0, err
		}
		for _, l := range Links(f, string(raw)) {
			checked++
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := filepath.Join(root, f)
			if path != "" {
				target = filepath.Join(root, filepath.Dir(f), filepath.FromSlash(path))
			}
			where := fmt.Sprintf("%s:%d: link %s", l.File, l.Line, l.Target)
			info, err := os.Stat(target)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: no such file %s", where, relTo(root, target)))
				continue
			}
			if anchor == "" {
				continue
			}
			if info.IsDir() || !strings.HasSuffix(target, ".md") {
				problems = append(problems, fmt.Sprintf("%s: an anchor into %s, which is not a Markdown file", where, relTo(root, target)))
				continue
			}
			a, err := anchors(target)
			if err != nil {
				return nil, 0, err
			}
			if !a[anchor] {
				problems = append(problems, fmt.Sprintf("%s: %s has no heading with anchor #%s", where, relTo(root, target), anchor))
			}
		}
	}
	return problems, checked, nil
}

func relTo(root, path string) string {
	if r, err := filepath.Rel(root, path); err == nil {
		return filepath.ToSlash(r)
	}
	return path
}
