package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, now time.Time, validity time.Duration) KeyPair {
	t.Helper()
	ca, err := NewCA("test-ca", now, validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestNeedsRenewal(t *testing.T) {
	c := &x509.Certificate{NotBefore: t0, NotAfter: t0.Add(90 * time.Hour)}
	tests := []struct {
		name string
		now  time.Time
		want bool
	}{
		{"fresh", t0.Add(time.Hour), false},
		{"just before the last third", t0.Add(59 * time.Hour), false},
		{"in the last third", t0.Add(61 * time.Hour), true},
		{"expired", t0.Add(100 * time.Hour), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NeedsRenewal(c, tt.now, 1.0/3); got != tt.want {
				t.Errorf("NeedsRenewal = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestServingCertificateChainsAndCovers(t *testing.T) {
	ca := mustCA(t, t0, 24*time.Hour)
	names := []string{"svc.ns.svc", "svc.ns.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("10.213.0.3")}
	s, err := NewServing(ca, names, ips, t0, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := ParseCert(s.CertPEM)
	caCert, _ := ParseCert(ca.CertPEM)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "svc.ns.svc", CurrentTime: t0.Add(time.Hour)}); err != nil {
		t.Errorf("verify: %v", err)
	}
	if !leaf.NotAfter.Equal(caCert.NotAfter) {
		t.Errorf("serving NotAfter %v outlives CA %v", leaf.NotAfter, caCert.NotAfter)
	}
	if !Covers(leaf, names, ips) {
		t.Error("does not cover its own names")
	}
	if Covers(leaf, []string{"other"}, nil) || Covers(leaf, nil, []net.IP{net.ParseIP("10.0.0.1")}) {
		t.Error("covers names it was not issued for")
	}
}

func TestMergeBundleKeepsLiveOldCAs(t *testing.T) {
	oldCA := mustCA(t, t0, 10*time.Hour)
	expired := mustCA(t, t0.Add(-20*time.Hour), 10*time.Hour)
	newCA := mustCA(t, t0.Add(5*time.Hour), 10*time.Hour)
	old := append(append([]byte{}, oldCA.CertPEM...), expired.CertPEM...)
	b, err := MergeBundle(newCA.CertPEM, old, t0.Add(5*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certs, err := parseAll(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []KeyPair{newCA, oldCA}
	if len(certs) != len(want) {
		t.Fatalf("bundle has %d certificates, want %d (new, old; expired dropped)", len(certs), len(want))
	}
	for i, w := range want {
		c, _ := ParseCert(w.CertPEM)
		if !certs[i].Equal(c) {
			t.Errorf("bundle[%d] = %s, want %s", i, certs[i].SerialNumber, c.SerialNumber)
		}
	}
	// Merging again with the same new CA does not duplicate it.
	again, _ := MergeBundle(newCA.CertPEM, b, t0.Add(5*time.Hour))
	if c, _ := parseAll(again); len(c) != 2 {
		t.Errorf("re-merge has %d certificates, want 2", len(c))
	}
}
