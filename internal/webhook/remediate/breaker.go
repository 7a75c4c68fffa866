package remediate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Breaker configures the circuit breaker: when a large share of new nodes
// never verifies (a broken agent image, a CNI release, an exhausted subnet),
// replacing them only buys more nodes that fail the same way. Replacing
// stops while at least Threshold of the last Window new nodes this
// controller watched went past the deadline without verifying, and resumes
// when a new node verifies.
type Breaker struct {
	// Threshold is the share (0, 1] of Window that opens the breaker; 0
	// turns it off.
	Threshold float64
	// Window is how many of the latest new-node outcomes count.
	Window int
}

// ParseBreakerThreshold reads "off" or a share such as "50%".
func ParseBreakerThreshold(s string) (float64, error) {
	if s == "off" {
		return 0, nil
	}
	pct, ok := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(pct, 64)
	if !ok || err != nil || v <= 0 || v > 100 || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not off or a share in (0%%, 100%%] such as \"50%%\"", s)
	}
	return v / 100, nil
}

// failuresToOpen is how many failures among Window open the breaker; 0
// means it is off.
func (b Breaker) failuresToOpen() int {
	if b.Threshold <= 0 || b.Window <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(b.Threshold*float64(b.Window)-1e-9)))
}

// breaker is the state: the latest outcomes (true: never verified) and
// whether replacing is stopped. Owned by the scan loop.
type breaker struct {
	cfg      Breaker
	outcomes []bool
	open     bool
}

// record adds one new node's outcome and reports whether the breaker
// changed state. It opens when the failures among the latest Window reach
// the threshold; it closes when a new node verifies, forgetting the
// failures before it, so it opens again only on new evidence.
func (b *breaker) record(failed bool) (changed bool) {
	need := b.cfg.failuresToOpen()
	if need == 0 {
		return false
	}
	if b.open && !failed {
		b.open, b.outcomes = false, nil
		return true
	}
	b.outcomes = append(b.outcomes, failed)
	if len(b.outcomes) > b.cfg.Window {
		b.outcomes = b.outcomes[len(b.outcomes)-b.cfg.Window:]
	}
	if !b.open && b.failures() >= need {
		b.open = true
		return true
	}
	return false
}

func (b *breaker) failures() int {
	n := 0
	for _, f := range b.outcomes {
		if f {
			n++
		}
	}
	return n
}
