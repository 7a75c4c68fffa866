package harness

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// Proxy forwards TCP from one address to another and can be cut: to its
// clients the target then looks unreachable (open connections closed, new
// ones refused) until it is restored. Tests put it between a webhook and the
// API server.
type Proxy struct {
	listen, target string

	mu    sync.Mutex
	ln    net.Listener // nil while cut
	conns map[net.Conn]struct{}
}

// StartProxy listens on listen and forwards to target until the test ends.
func StartProxy(t testing.TB, listen, target string) *Proxy {
	t.Helper()
	p := &Proxy{listen: listen, target: target, conns: map[net.Conn]struct{}{}}
	p.Restore(t)
	t.Cleanup(p.Cut)
	return p
}

// Restore listens again after Cut; it is a no-op while not cut.
func (p *Proxy) Restore(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", p.listen)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(ln, c)
		}
	}()
}

// Cut closes the listener and every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *Proxy) pipe(ln net.Listener, c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln {
		// Cut while this connection was being dialled: it must not survive.
		p.mu.Unlock()
		c.Close()
		up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// KubeconfigVia copies the kubeconfig src to dst with every cluster's server
// replaced by https://addr, so its user reaches the API server through a
// Proxy on addr (the API server's certificate is still verified, for its
// kubernetes.default.svc name). It returns dst.
func KubeconfigVia(t testing.TB, src, addr, dst string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
		c.TLSServerName = "kubernetes.default.svc"
	}
	if err := clientcmd.WriteToFile(*cfg, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}
