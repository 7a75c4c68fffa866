package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// KeyPair is a PEM certificate and its PEM private key.
type KeyPair struct {
	CertPEM, KeyPEM []byte
}

// backdate absorbs clock skew between the webhook and the API server.
const backdate = 5 * time.Minute

// NewCA makes a self-signed ECDSA P-256 CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: generate CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: sign CA: %w", err)
	}
	return encodePair(der, key)
}

// NewServing makes a serving certificate for dnsNames and ips signed by ca,
// valid from now for validity but never beyond the CA.
func NewServing(ca KeyPair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (KeyPair, error) {
	caPair, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: load CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: generate serving key: %w", err)
	}
	cn := "kube-node-ready-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	end := now.Add(validity)
	if end.After(caPair.Leaf.NotAfter) {
		end = caPair.Leaf.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-backdate),
		NotAfter:     end,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caPair.Leaf, &key.PublicKey, caPair.PrivateKey)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: sign serving certificate: %w", err)
	}
	return encodePair(der, key)
}

// NeedsRenewal reports whether cert is due: it is expired, or less than
// renewBefore of its life is left. renewBefore is a fraction of the
// certificate's total lifetime (e.g. 1/3), so short test certificates and
// year-long production ones renew at the same point of their life.
func NeedsRenewal(cert *x509.Certificate, now time.Time, renewBefore float64) bool {
	life := cert.NotAfter.Sub(cert.NotBefore)
	left := cert.NotAfter.Sub(now)
	return left <= time.Duration(float64(life)*renewBefore)
}

// Covers reports whether cert names every one of dnsNames and ips.
func Covers(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// ParseCert decodes the first certificate of a PEM block list.
func ParseCert(certPEM []byte) (*x509.Certificate, error) {
	certs, err := parseAll(certPEM)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// MergeBundle returns a PEM bundle with newCA first followed by the
// certificates of old that are still valid at now and differ from newCA, so
// clients trust both sides of a CA rollover until the old CA expires.
func MergeBundle(newCA, old []byte, now time.Time) ([]byte, error) {
	first, err := ParseCert(newCA)
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), bytes.TrimSpace(newCA)...)
	out = append(out, '\n')
	olds, _ := parseAll(old) // an unreadable old bundle is dropped, not fatal
	for _, c := range olds {
		if c.Equal(first) || now.After(c.NotAfter) {
			continue
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out, nil
}

func parseAll(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certs: parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("certs: no PEM certificate found")
	}
	return out, nil
}

func encodePair(der []byte, key *ecdsa.PrivateKey) (KeyPair, error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("certs: marshal key: %w", err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}
