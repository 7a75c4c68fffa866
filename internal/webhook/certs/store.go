// Package certs gives the webhook its serving certificate: from files that
// are reloaded when they change, or self-managed in a Secret with the CA
// bundle written into the MutatingWebhookConfiguration.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"sync/atomic"
)

// Store holds the certificate the TLS server presents and, optionally, the
// CAs that client certificates must chain to. Both can be swapped while
// serving; each new handshake sees the latest.
type Store struct {
	cert      atomic.Pointer[tls.Certificate]
	clientCAs atomic.Pointer[x509.CertPool]
}

// SetCertificate replaces the serving certificate.
func (s *Store) SetCertificate(c *tls.Certificate) { s.cert.Store(c) }

// SetClientCAs replaces the pool that verifies client certificates.
func (s *Store) SetClientCAs(p *x509.CertPool) { s.clientCAs.Store(p) }

// Certificate returns the current serving certificate, or nil.
func (s *Store) Certificate() *tls.Certificate { return s.cert.Load() }

// Ready reports whether there is a certificate to serve.
func (s *Store) Ready() bool { return s.cert.Load() != nil }

// TLSConfig returns a server configuration backed by the store. With
// requireClientCert, every client must present a certificate that chains to
// the store's client CAs.
func (s *Store) TLSConfig(requireClientCert bool) *tls.Config {
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.cert.Load(); c != nil {
				return c, nil
			}
			return nil, errors.New("certs: no serving certificate yet")
		},
	}
	if !requireClientCert {
		return base
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = s.clientCAs.Load()
		if c.ClientCAs == nil {
			return nil, errors.New("certs: no client CA loaded")
		}
		return c, nil
	}
	return cfg
}
