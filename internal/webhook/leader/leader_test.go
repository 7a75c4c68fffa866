package leader

import (
	"testing"
	"time"
)

// client-go starts OnStartedLeading in a goroutine it does not wait for: a
// lead that had not begun when the term ended must never begin.
func TestTermNeverLeadsAfterItEnded(t *testing.T) {
	var tm term
	tm.end()
	if _, ok := tm.begin(); ok {
		t.Fatal("begin after end = true, want false")
	}
}

func TestTermEndWaitsForRunningLead(t *testing.T) {
	var tm term
	done, ok := tm.begin()
	if !ok {
		t.Fatal("begin = false, want true")
	}
	ended := make(chan struct{})
	go func() { tm.end(); close(ended) }()
	select {
	case <-ended:
		t.Fatal("end returned while lead was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(done)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("end did not return after lead finished")
	}
}
