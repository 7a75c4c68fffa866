package harness

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sample is one sample of a metric in a Prometheus text exposition.
type Sample struct {
	// Labels is the text between the braces (`code="200",verb="GET"`),
	// empty for a metric without labels.
	Labels string
	// Value is the sample's value.
	Value float64
}

// Label is the value of the label name, or "" if the sample has none.
func (s Sample) Label(name string) string {
	rest := s.Labels
	for rest != "" {
		key, after, ok := strings.Cut(rest, `="`)
		if !ok {
			return ""
		}
		end := closingQuote(after)
		if end < 0 {
			return ""
		}
		if strings.TrimLeft(key, ", ") == name {
			return strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(after[:end])
		}
		rest = after[end+1:]
	}
	return ""
}

// closingQuote is the index of the first unescaped '"' in s, or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// Samples reads every sample of the metric name from a Prometheus text
// exposition.
func Samples(r io.Reader, name string) ([]Sample, error) {
	var out []Sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		var s Sample
		if rest[0] == '{' {
			end := labelsEnd(rest)
			if end < 0 {
				return nil, fmt.Errorf("metric line %q: unterminated labels", line)
			}
			s.Labels, rest = rest[1:end], rest[end+1:]
		}
		f := strings.Fields(rest) // value, then an optional timestamp
		if len(f) == 0 {
			return nil, fmt.Errorf("metric line %q: no value", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// labelsEnd is the index of the '}' that closes the label set opening s, or -1.
func labelsEnd(s string) int {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			end := closingQuote(s[i+1:])
			if end < 0 {
				return -1
			}
			i += end + 1
		case '}':
			return i
		}
	}
	return -1
}

// SumMetric sums the samples of name in a Prometheus text exposition whose
// labels contain every one of match (`result="patched"`).
func SumMetric(r io.Reader, name string, match ...string) (float64, error) {
	samples, err := Samples(r, name)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, s := range samples {
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(s.Labels, m)
		}
		if ok {
			sum += s.Value
		}
	}
	return sum, nil
}

// scrapeTimeout bounds one scrape. A test reads a metric to decide, so a
// slow answer is waited for: Karpenter's page (controller-runtime's,
// client-go's and its own families) took more than 2 s to serve at load 30
// on 2 cores, and three Karpenter scenarios failed on the timeout.
const scrapeTimeout = 15 * time.Second

// ScrapeMetric fetches a /metrics URL and sums the samples of name as
// SumMetric does.
func ScrapeMetric(url, name string, match ...string) (float64, error) {
	resp, err := (&http.Client{Timeout: scrapeTimeout}).Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return SumMetric(resp.Body, name, match...)
}
