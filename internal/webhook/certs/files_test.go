package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writePair(t *testing.T, dir string, p KeyPair) (string, string) {
	t.Helper()
	c, k := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(c, p.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, p.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c, k
}

func serving(t *testing.T, ca KeyPair) KeyPair {
	t.Helper()
	s, err := NewServing(ca, []string{"webhook.test"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshakeSerial opens a new TLS connection and returns the serial of the
// certificate the server presented.
func handshakeSerial(t *testing.T, addr string, roots *x509.CertPool, client *tls.Certificate) (string, error) {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: "webhook.test"}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	// With TLS 1.3 a rejected client certificate surfaces on the first read.
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		return "", err
	}
	if _, err := conn.Read(make([]byte, 1)); err != nil && err != io.EOF {
		return "", err
	}
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

func serve(t *testing.T, store *Store, requireClient bool) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", store.TLSConfig(requireClient))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ErrorLog: nil}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func serialOf(p KeyPair) string {
	c, _ := ParseCert(p.CertPEM)
	return c.SerialNumber.String()
}

func TestFileSourceReloadsAndKeepsLastGood(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, time.Now(), 24*time.Hour)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	first := serving(t, ca)
	certFile, keyFile := writePair(t, dir, first)
	store := &Store{}
	src := &FileSource{CertFile: certFile, KeyFile: keyFile, Store: store, Log: slog.New(slog.DiscardHandler)}
	if err := src.Load(); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, store, false)

	check := func(name, want string) {
		t.Helper()
		got, err := handshakeSerial(t, addr, roots, nil)
		if err != nil {
			t.Fatalf("%s: handshake: %v", name, err)
		}
		if got != want {
			t.Errorf("%s: served serial %s, want %s", name, got, want)
		}
	}
	check("initial", serialOf(first))

	second := serving(t, ca)
	writePair(t, dir, second)
	if changed, err := src.reload(); err != nil || !changed {
		t.Fatalf("reload of a new pair: changed=%v err=%v", changed, err)
	}
	check("after rotation", serialOf(second))

	steps := []struct {
		name  string
		write func()
	}{
		{"key does not match certificate", func() { os.WriteFile(keyFile, serving(t, ca).KeyPEM, 0o600) }},
		{"certificate is garbage", func() { os.WriteFile(certFile, []byte("not a certificate"), 0o600) }},
		{"certificate file missing", func() { os.Remove(certFile) }},
	}
	for _, s := range steps {
		s.write()
		if _, err := src.reload(); err == nil {
			t.Errorf("%s: reload succeeded, want an error", s.name)
		}
		check(s.name, serialOf(second))
	}
	if src.Load() == nil {
		t.Error("Load of broken files succeeded")
	}
}

func TestClientCertificateRequired(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, time.Now(), 24*time.Hour)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	certFile, keyFile := writePair(t, dir, serving(t, ca))
	clientCA := mustCA(t, time.Now(), 24*time.Hour)
	caFile := filepath.Join(dir, "client-ca.crt")
	os.WriteFile(caFile, clientCA.CertPEM, 0o600)
	store := &Store{}
	src := &FileSource{CertFile: certFile, KeyFile: keyFile, ClientCAFile: caFile, Store: store, Log: slog.New(slog.DiscardHandler)}
	if err := src.Load(); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, store, true)

	clientPair := func(ca KeyPair) *tls.Certificate {
		// A serving-style leaf lacks the client-auth usage; make one that has it.
		p, err := newClientCert(ca)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return &c
	}
	tests := []struct {
		name   string
		client *tls.Certificate
		ok     bool
	}{
		{"no client certificate", nil, false},
		{"client certificate from another CA", clientPair(mustCA(t, time.Now(), time.Hour)), false},
		{"client certificate from the client CA", clientPair(clientCA), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := handshakeSerial(t, addr, roots, tt.client)
			if (err == nil) != tt.ok {
				t.Errorf("handshake err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestFileSourceRunReportsAFailureOnce(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, time.Now(), 24*time.Hour)
	certFile, keyFile := writePair(t, dir, serving(t, ca))
	var logs strings.Builder
	src := &FileSource{CertFile: certFile, KeyFile: keyFile, Store: &Store{}, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	if err := src.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, serving(t, ca).KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	src.Run(ctx, 10*time.Millisecond) // returns when ctx ends
	if n := strings.Count(logs.String(), "certificate reload failed"); n != 1 {
		t.Errorf("the same failure was logged %d times over ~20 reloads, want once:\n%s", n, logs.String())
	}
}
