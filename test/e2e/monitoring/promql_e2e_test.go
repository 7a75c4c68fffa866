//go:build e2e

package monitoring_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// metricNames returns the metric names a PromQL expression selects, sorted
// and without repeats: every vector selector's name, and the value of a
// `__name__="..."` matcher. It reads PromQL's lexical structure rather than
// its whole grammar (the parser lives in the Prometheus module, far heavier
// than this project's dependencies): strings, label matchers in braces,
// ranges and subqueries in brackets, grouping label lists after by, without,
// on, ignoring, group_left and group_right, offset and @ modifiers; an
// identifier followed by "(" is a function or an aggregation, and keywords
// and aggregation operators are never names. What it cannot tell (a
// __name__ regex) is an error, so a dashboard change it does not understand
// fails the test instead of going unchecked. Grafana variables ($name,
// ${name}) are skipped.
func metricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	i := 0
	skipSpace := func() {
		for i < len(s) {
			switch {
			case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r':
				i++
			case s[i] == '#':
				for i < len(s) && s[i] != '\n' {
					i++
				}
			default:
				return
			}
		}
	}
	// skipString skips a quoted string starting at s[i] and returns its raw content.
	skipString := func() (string, error) {
		q := s[i]
		start := i + 1
		for i++; i < len(s); i++ {
			if s[i] == '\\' && q != '`' {
				i++
				continue
			}
			if s[i] == q {
				i++
				return s[start : i-1], nil
			}
		}
		return "", fmt.Errorf("unterminated string at %d in %q", start-1, expr)
	}
	ident := func() string {
		start := i
		for i < len(s) && isIdentChar(s[i], i == start) {
			i++
		}
		return s[start:i]
	}
	// skipTo skips past the close bracket matching the open one at s[i],
	// over strings; inBraces collects __name__ matchers.
	var skipTo func(open, close byte) error
	skipTo = func(open, close byte) error {
		start := i
		i++
		for i < len(s) {
			switch c := s[i]; {
			case c == '"' || c == '\'' || c == '`':
				if _, err := skipString(); err != nil {
					return err
				}
			case c == close:
				i++
				return nil
			case c == open:
				if err := skipTo(open, close); err != nil {
					return err
				}
			case open == '{' && isIdentChar(c, true):
				label := ident()
				skipSpace()
				op := ""
				for i < len(s) && strings.IndexByte("=!~", s[i]) >= 0 {
					op += string(s[i])
					i++
				}
				skipSpace()
				if label == "__name__" && i < len(s) && (s[i] == '"' || s[i] == '\'' || s[i] == '`') {
					v, err := skipString()
					if err != nil {
						return err
					}
					if op != "=" {
						return fmt.Errorf("matcher __name__%s%q in %q: only __name__= names a metric that can be checked", op, v, expr)
					}
					names = append(names, v)
				}
			default:
				i++
			}
		}
		return fmt.Errorf("unclosed %q at %d in %q", open, start, expr)
	}
	for {
		skipSpace()
		if i >= len(s) {
			break
		}
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := skipString(); err != nil {
				return nil, err
			}
		case c == '{':
			if err := skipTo('{', '}'); err != nil {
				return nil, err
			}
		case c == '[':
			if err := skipTo('[', ']'); err != nil {
				return nil, err
			}
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				if err := skipTo('{', '}'); err != nil {
					return nil, err
				}
			} else {
				ident()
			}
		case c == '@':
			i++
			skipSpace()
			if i < len(s) && isIdentChar(s[i], true) { // start() or end()
				ident()
				skipSpace()
				if i < len(s) && s[i] == '(' {
					if err := skipTo('(', ')'); err != nil {
						return nil, err
					}
				}
			} else {
				skipNumber(s, &i)
			}
		case c >= '0' && c <= '9' || c == '.':
			skipNumber(s, &i)
		case isIdentChar(c, true):
			word := ident()
			lower := strings.ToLower(word)
			skipSpace()
			switch {
			case groupingKeywords[lower]:
				if i < len(s) && s[i] == '(' {
					if err := skipTo('(', ')'); err != nil {
						return nil, err
					}
				}
			case lower == "offset":
				if i < len(s) && s[i] == '-' {
					i++
				}
				skipNumber(s, &i)
			case keywords[lower] || aggregations[lower]:
			case i < len(s) && s[i] == '(':
				// A function call; its arguments are read on.
			default:
				names = append(names, word)
			}
		default:
			i++
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// skipNumber skips a number or a duration (5m, 1h30m, 0x1f, 1e3, 2.5).
func skipNumber(s string, i *int) {
	for *i < len(s) && (isIdentChar(s[*i], false) || s[*i] == '.' ||
		((s[*i] == '+' || s[*i] == '-') && *i > 0 && (s[*i-1] == 'e' || s[*i-1] == 'E'))) {
		*i++
	}
}

func isIdentChar(c byte, first bool) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

var (
	// groupingKeywords are followed by a parenthesized list of label names.
	groupingKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	// keywords are binary operators and literals that look like identifiers.
	keywords = map[string]bool{"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "inf": true, "nan": true}
	// aggregations may be followed by by/without before their "(".
	aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
		"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}
)

// TestMetricNamesOfExpressions: the extraction the metric-existence check
// relies on, on the shapes the chart's rules and dashboard use and on the
// ones that would fool a plain word match.
func TestMetricNamesOfExpressions(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`node_ready_verified == 0`, []string{"node_ready_verified"}},
		{`increase(node_ready_taint_operations_total{operation="add",result="success"}[10m]) > 0`, []string{"node_ready_taint_operations_total"}},
		{`max by (namespace) (node_remediation_overdue_nodes) > 0`, []string{"node_remediation_overdue_nodes"}},
		{`sum by (namespace, pod) (rate(node_cleanup_webhook_requests_total{result=~"invalid|panic|bad_request|too_large"}[5m])) > 0`, []string{"node_cleanup_webhook_requests_total"}},
		{`count(node_ready_verified == 0) or vector(0)`, []string{"node_ready_verified"}},
		{`histogram_quantile(0.95, sum by (check, le) (rate(node_check_duration_seconds_bucket[5m])))`, []string{"node_check_duration_seconds_bucket"}},
		{`topk(10, node_ready_time_to_verified_seconds)`, []string{"node_ready_time_to_verified_seconds"}},
		{`sum by (check) (rate(node_check_failures_total[5m])) * 60`, []string{"node_check_failures_total"}},
		{`sum without (pod) (a_total offset 5m) / on (node) group_left (zone) b{x="by (y)"} @ 1609746000`, []string{"a_total", "b"}},
		{`rate(x[5m:1m] offset -1h) and ignoring(le) y unless z_bucket{le="+Inf"} > bool 1e3 + Inf`, []string{"x", "y", "z_bucket"}},
		{`{__name__="named_metric", job="j"} # comment mentioning not_a_metric`, []string{"named_metric"}},
		{`sum(rate(m[$__rate_interval])) by (l) + sum(m2{n=~"$node"}) + ${var}`, []string{"m", "m2"}},
		{`label_replace(up{job="x"}, "dst", "$1", "src", "(.*)")`, []string{"up"}},
	} {
		got, err := metricNames(tc.expr)
		if err != nil {
			t.Errorf("metricNames(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`{__name__=~"node_.*"}`, `sum(x{a="b)`, `rate(x[5m)`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%q) = %q, want an error", bad, got)
		}
	}
}
