// Package budget is a limit on how many nodes may be in some state at once,
// given as a count ("5") or a share of all nodes ("10%"), never below one:
// the agents' fleet budget (--fleet-budget) and the webhook's replacement
// budget (--max-replacing).
package budget

import (
	"fmt"
	"strconv"
	"strings"
)

// Budget is a parsed count or percentage.
type Budget struct {
	count   int
	percent float64
}

// Parse parses "5" or "10%".
func Parse(s string) (Budget, error) {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v <= 0 || v > 100 {
			return Budget{}, fmt.Errorf("%q: want a percentage in (0, 100]", s)
		}
		return Budget{percent: v}, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return Budget{}, fmt.Errorf("%q: want a count of at least 1 or a percentage such as 10%%", s)
	}
	return Budget{count: v}, nil
}

// Limit is how many of total nodes the budget allows at once (at least 1,
// percentages rounded down).
func (b Budget) Limit(total int) int {
	n := b.count
	if b.percent > 0 {
		n = int(float64(total) * b.percent / 100)
	}
	return max(n, 1)
}
