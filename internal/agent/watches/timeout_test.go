package watches

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTimeoutSecondsBounds(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    float64
		want int64
	}{
		{"lowest", 0, 1800},
		{"middle", 0.5, 2700},
		{"highest", 0.9999999, 3599},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := timeoutSeconds(tc.r); got != tc.want {
				t.Errorf("timeoutSeconds(%v) = %d, want %d", tc.r, got, tc.want)
			}
		})
	}
}

func TestLengthenStaysInWindow(t *testing.T) {
	seen := map[int64]bool{}
	for range 1000 {
		o := metav1.ListOptions{TimeoutSeconds: new(int64(300))}
		Lengthen(&o)
		s := *o.TimeoutSeconds
		if s < int64(MinTimeout.Seconds()) || s > int64(MaxTimeout.Seconds()) {
			t.Fatalf("timeout %d s outside [%v, %v]", s, MinTimeout, MaxTimeout)
		}
		seen[s] = true
	}
	// Spread, so that a fleet's watches do not all renew at once.
	if len(seen) < 100 {
		t.Errorf("only %d distinct timeouts in 1000 watches", len(seen))
	}
}
