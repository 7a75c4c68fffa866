package app

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/agent/checks"
)

// PrintRound writes a round as a table: check, result, duration, error.
func PrintRound(w io.Writer, r checks.Round) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDURATION\tERROR")
	for _, res := range r.Results {
		result, msg := "pass", ""
		if res.Err != nil {
			result, msg = "FAIL", strings.ReplaceAll(res.Err.Error(), "\n", " ")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", res.Name, result, res.Duration.Round(100*time.Microsecond), msg)
	}
	verdict := "all checks passed"
	if !r.Passed() {
		verdict = "FAILED: " + strings.Join(r.Failed(), ", ")
	}
	fmt.Fprintf(tw, "\nround took %s: %s\n", r.Duration.Round(100*time.Microsecond), verdict)
	return tw.Flush()
}
