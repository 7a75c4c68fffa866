// Package watches holds what every watch of the agent shares: how long one
// watch request lives (Lengthen), and how its failures are logged
// (Episodes).
package watches

import (
	"math/rand/v2"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MinTimeout and MaxTimeout bound the life of one watch request of the
// agent: the same window kube-apiserver gives a watch that names no timeout,
// [1, 2) times its --min-request-timeout, whose default is 1800 s.
const (
	MinTimeout = 30 * time.Minute
	MaxTimeout = 60 * time.Minute
)

// Lengthen sets o.TimeoutSeconds, for a watch request, to a random value in
// [MinTimeout, MaxTimeout]. Called from a ListWatch's WatchFunc, it replaces
// the 5–10 min client-go's reflector asks for (SharedIndexInformer does not
// expose ReflectorOptions.MinWatchTimeout): at 10 000 agents, each with three
// watches, those renewals were 0.22 requests per node per round on top of
// the one read the api check makes.
//
// A longer watch loses nothing:
//   - when it ends, the reflector resumes it from the last resourceVersion
//     it saw (no list), exactly as after a short one;
//   - the API server's watch cache sends a bookmark about every minute and
//     one just before the deadline, so that resourceVersion stays recent and
//     a resumed watch is not answered "too old";
//   - a connection that died without a FIN is still found within about
//     45 s: client-go's transport (k8s.io/apimachinery/pkg/util/net
//     SetTransportDefaults, which the agent's transport goes through with
//     its own dialer) turns on HTTP/2 health pings, ReadIdleTimeout 30 s and
//     PingTimeout 15 s, unless HTTP2_READ_IDLE_TIMEOUT_SECONDS=0 or
//     DISABLE_HTTP2 is set; the dead connection's watches then end with an
//     error and are resumed on a new one;
//   - the random spread keeps a fleet's renewals from bunching after an API
//     server restart, as the reflector's own randomness did.
func Lengthen(o *metav1.ListOptions) {
	s := timeoutSeconds(rand.Float64())
	o.TimeoutSeconds = &s
}

// timeoutSeconds maps r in [0, 1) onto [MinTimeout, MaxTimeout] in seconds.
func timeoutSeconds(r float64) int64 {
	lo, hi := MinTimeout.Seconds(), MaxTimeout.Seconds()
	return int64(lo + r*(hi-lo))
}
