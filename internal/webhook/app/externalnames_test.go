package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

func TestJudgeExternalNames(t *testing.T) {
	fail := errors.New("server answered NXDOMAIN")
	tests := []struct {
		name        string
		known       map[string]bool
		results     map[string]error
		want        []string // type/reason/name
		wantFailing map[string]bool
	}{
		{
			name:        "first round: a Normal Event for a name that resolves, a Warning for one that does not",
			results:     map[string]error{"a.example": nil, "b.example": fail},
			want:        []string{"Normal/ExternalNameResolved/a.example", "Warning/ExternalNameUnresolved/b.example"},
			wantFailing: map[string]bool{"b.example": true},
		},
		{
			name:        "still resolving: nothing",
			known:       map[string]bool{},
			results:     map[string]error{"a.example": nil},
			wantFailing: map[string]bool{},
		},
		{
			name:        "still failing: a Warning every round, so the series stays alive",
			known:       map[string]bool{"b.example": true},
			results:     map[string]error{"b.example": fail},
			want:        []string{"Warning/ExternalNameUnresolved/b.example"},
			wantFailing: map[string]bool{"b.example": true},
		},
		{
			name:        "resolves again: a Normal Event",
			known:       map[string]bool{"b.example": true},
			results:     map[string]error{"b.example": nil},
			want:        []string{"Normal/ExternalNameResolved/b.example"},
			wantFailing: map[string]bool{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events, failing := judgeExternalNames(tt.known, tt.results)
			var got []string
			for _, e := range events {
				got = append(got, e.eventType+"/"+e.reason+"/"+e.name)
				if !strings.Contains(e.note, e.name) {
					t.Errorf("note %q does not name %s", e.note, e.name)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("events = %v, want %v", got, tt.want)
			}
			if !reflect.DeepEqual(failing, tt.wantFailing) {
				t.Errorf("failing = %v, want %v", failing, tt.wantFailing)
			}
		})
	}
}

// TestExternalNamesRoundEveryPeriod: each round sets the gauge and records
// its Events; Run makes a round at once and the next when the clock passes
// the period.
func TestExternalNamesRoundEveryPeriod(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var broken atomic.Bool
	broken.Store(true)
	var resolved atomic.Int32
	var current []nameEvent
	x := &externalNames{
		names: []string{"up.example", "flaky.example"},
		resolve: func(_ context.Context, name string) error {
			resolved.Add(1)
			if name == "flaky.example" && broken.Load() {
				return errors.New("no answer")
			}
			return nil
		},
		clock:      clk,
		unresolved: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}),
		log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		record:     func(e nameEvent) { current = append(current, e) },
	}
	round := func() []nameEvent {
		current = nil
		x.round(t.Context())
		return current
	}
	if got := round(); len(got) != 2 || got[0].reason != api.EventExternalNameUnresolved || got[0].name != "flaky.example" ||
		got[1].reason != api.EventExternalNameResolved || got[1].name != "up.example" {
		t.Fatalf("first round: %+v", got)
	}
	if v := testutil.ToFloat64(x.unresolved); v != 1 {
		t.Errorf("unresolved = %v after the first round, want 1", v)
	}
	if got := round(); len(got) != 1 || got[0].reason != api.EventExternalNameUnresolved {
		t.Fatalf("second round, flaky.example still broken: %+v", got)
	}
	broken.Store(false)
	if got := round(); len(got) != 1 || got[0].reason != api.EventExternalNameResolved || got[0].name != "flaky.example" {
		t.Fatalf("third round, flaky.example back: %+v", got)
	}
	if v := testutil.ToFloat64(x.unresolved); v != 0 {
		t.Errorf("unresolved = %v once every name resolves, want 0", v)
	}

	x.record = nil
	resolved.Store(0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	waitFor := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for resolved.Load() < want || !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatalf("%d names resolved, want %d", resolved.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(2)
	if n := resolved.Load(); n != 2 {
		t.Fatalf("%d names resolved before the period passed, want 2", n)
	}
	clk.Step(externalNamesPeriod)
	waitFor(4)
	cancel()
	<-done
}

// TestResolveWithAsksTheServer: a name with an address resolves, an
// NXDOMAIN does not, and without a resolver configuration nothing does.
func TestResolveWithAsksTheServer(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Name == "up.example." && q.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR("up.example. 30 IN A 192.0.2.1")
			m.Answer = append(m.Answer, rr)
		} else if q.Question[0].Name != "up.example." {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	resolve := resolveWith("", pc.LocalAddr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := resolve(ctx, "up.example"); err != nil {
		t.Errorf("up.example: %v", err)
	}
	if err := resolve(ctx, "gone.example"); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("gone.example: %v, want NXDOMAIN", err)
	}
	if err := resolveWith(filepath.Join(t.TempDir(), "none"), "")(ctx, "up.example"); err == nil {
		t.Error("no resolver configuration: resolved")
	}
}
