package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// FileSource loads the serving certificate (and optionally a client CA
// bundle) from files and reloads them when their content changes. A change
// that does not load — unreadable, half-written, key not matching the
// certificate — is logged and the previous certificate keeps serving.
type FileSource struct {
	// CertFile and KeyFile are the PEM serving certificate and key.
	CertFile, KeyFile string
	// ClientCAFile, when set, is a PEM bundle that client certificates must chain to.
	ClientCAFile string
	// Store receives what was loaded.
	Store *Store
	// Log receives reload results.
	Log *slog.Logger

	lastCert, lastKey, lastCA []byte
}

// Load reads the files once and installs them; it fails if they do not load.
func (f *FileSource) Load() error {
	_, err := f.reload()
	return err
}

// Run re-reads the files every interval until ctx ends. A failure is logged
// when it first appears or changes, not on every tick while it lasts.
func (f *FileSource) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := f.reload()
		if err == nil {
			lastErr = ""
		}
		switch {
		case err != nil && err.Error() == lastErr:
		case err != nil:
			lastErr = err.Error()
			f.Log.Error("certificate reload failed; still serving the previous certificate", "error", err)
		case changed:
			f.Log.Info("certificate reloaded", "cert_file", f.CertFile, "not_after", notAfter(f.Store.Certificate()))
		}
	}
}

// reload installs the files if they differ from what was last installed.
func (f *FileSource) reload() (changed bool, err error) {
	certPEM, err := os.ReadFile(f.CertFile)
	if err != nil {
		return false, fmt.Errorf("certs: read %s: %w", f.CertFile, err)
	}
	keyPEM, err := os.ReadFile(f.KeyFile)
	if err != nil {
		return false, fmt.Errorf("certs: read %s: %w", f.KeyFile, err)
	}
	var caPEM []byte
	if f.ClientCAFile != "" {
		if caPEM, err = os.ReadFile(f.ClientCAFile); err != nil {
			return false, fmt.Errorf("certs: read %s: %w", f.ClientCAFile, err)
		}
	}
	if bytes.Equal(certPEM, f.lastCert) && bytes.Equal(keyPEM, f.lastKey) && bytes.Equal(caPEM, f.lastCA) {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("certs: load %s and %s: %w", f.CertFile, f.KeyFile, err)
	}
	var pool *x509.CertPool
	if f.ClientCAFile != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return false, fmt.Errorf("certs: %s holds no PEM certificate", f.ClientCAFile)
		}
	}
	f.Store.SetCertificate(&pair)
	if pool != nil {
		f.Store.SetClientCAs(pool)
	}
	f.lastCert, f.lastKey, f.lastCA = certPEM, keyPEM, caPEM
	return true, nil
}

func notAfter(c *tls.Certificate) time.Time {
	if c == nil || c.Leaf == nil {
		return time.Time{}
	}
	return c.Leaf.NotAfter
}
