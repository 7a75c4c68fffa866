package agent

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestDropStalledKeepsLiveConnections: on real loopback sockets, a live
// connection (its peer's kernel acknowledges what is sent, whether or not
// the peer reads it, as a busy API server's does) is kept, and one its peer
// closed is dropped and forgotten.
func TestDropStalledKeepsLiveConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	tr := newConnTracker((&net.Dialer{}).DialContext)
	live, err := tr.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveServer := <-accepted
	defer liveServer.Close()
	// Sent and never read by the server: acknowledged by its kernel all the same.
	if _, err := live.Write([]byte("GET /readyz HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := tr.DropStalled(); n != 0 {
		t.Fatalf("DropStalled dropped %d connections, want 0: the peer acknowledges", n)
	}
	if _, err := live.Write([]byte("x")); err != nil {
		t.Errorf("live connection unusable after DropStalled: %v", err)
	}

	gone, err := tr.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	(<-accepted).Close()
	// The peer's FIN arrives: the socket leaves ESTABLISHED.
	_ = gone.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := gone.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a connection its peer closed: %v, want EOF", err)
	}
	if n := tr.DropStalled(); n != 1 {
		t.Fatalf("DropStalled dropped %d connections, want 1: the one its peer closed", n)
	}
	if n := len(tr.open); n != 1 {
		t.Errorf("%d connections tracked after the drop, want 1", n)
	}
	if _, err := gone.Write([]byte("x")); err == nil {
		t.Error("the dropped connection is still open")
	}
}
