package certs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestSelfManagedRenewsServingThenCA(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "knr"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "a.example.com"}, {Name: "b.example.com"}},
	})
	now := t0
	store := &Store{}
	m := &SelfManaged{
		Client: client, Namespace: "ns", SecretName: "certs",
		DNSNames: []string{"svc.ns.svc"}, IPs: []net.IP{net.ParseIP("10.213.0.3")},
		CAValidity: 300 * time.Hour, CertValidity: 30 * time.Hour, RenewBefore: 1.0 / 3,
		WebhookConfigName: "knr", Store: store, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now },
	}
	state := func() (caSerial, servingSerial string, bundle []byte) {
		t.Helper()
		sec, err := client.CoreV1().Secrets("ns").Get(ctx, "certs", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "knr", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range cfg.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, sec.Data[SecretBundle]) {
				t.Errorf("webhook %s caBundle differs from the secret's bundle", w.Name)
			}
		}
		if got, want := store.Certificate().Leaf.SerialNumber.String(), serialOf(KeyPair{CertPEM: sec.Data[SecretCert]}); got != want {
			t.Errorf("store serves %s, secret holds %s", got, want)
		}
		return serialOf(KeyPair{CertPEM: sec.Data[SecretCACert]}), serialOf(KeyPair{CertPEM: sec.Data[SecretCert]}), sec.Data[SecretBundle]
	}

	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca1, s1, _ := state()

	now = now.Add(time.Hour)
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if ca, s, _ := state(); ca != ca1 || s != s1 {
		t.Errorf("fresh certificates changed: ca %s→%s serving %s→%s", ca1, ca, s1, s)
	}

	now = t0.Add(25 * time.Hour) // serving cert in its last third
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca2, s2, _ := state()
	if ca2 != ca1 || s2 == s1 {
		t.Errorf("serving renewal: ca %s→%s (want same), serving %s→%s (want new)", ca1, ca2, s1, s2)
	}

	now = t0.Add(210 * time.Hour) // CA in its last third
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	ca3, s3, bundle := state()
	if ca3 == ca1 || s3 == s2 {
		t.Errorf("CA renewal: ca %s→%s, serving %s→%s; want both new", ca1, ca3, s2, s3)
	}
	certs, err := parseAll(bundle)
	if err != nil || len(certs) != 2 || certs[0].SerialNumber.String() != ca3 || certs[1].SerialNumber.String() != ca1 {
		t.Errorf("bundle after CA rollover = %d certs (%v), want [new %s, old %s]", len(certs), err, ca3, ca1)
	}

	now = t0.Add(301 * time.Hour) // old CA expired: dropped from the bundle on the next CA change only
	m.DNSNames = append(m.DNSNames, "svc.ns.svc.cluster.local")
	if err := m.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, s4, _ := state(); s4 == s3 {
		t.Error("serving certificate not reissued for a new DNS name")
	}
}

func TestSelfManagedAdoptsExistingSecret(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	mk := func() *SelfManaged {
		return &SelfManaged{Client: client, Namespace: "ns", SecretName: "certs", DNSNames: []string{"svc.ns.svc"},
			CAValidity: time.Hour * 100, CertValidity: time.Hour * 10, RenewBefore: 1.0 / 3, Store: &Store{}, Log: slog.New(slog.DiscardHandler)}
	}
	a, b := mk(), mk()
	if err := a.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Store.Certificate().Certificate[0], b.Store.Certificate().Certificate[0]) {
		t.Error("second replica made its own certificate instead of adopting the Secret's")
	}
}

// TestSelfManagedSaysWhoCreatesTheSecret: without the right to create
// Secrets (the chart's RBAC), a missing Secret is an error that says the
// chart creates it, and nothing is served from a Secret that does not exist.
func TestSelfManagedSaysWhoCreatesTheSecret(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("secrets"), "certs", errors.New("RBAC"))
	})
	m := &SelfManaged{Client: client, Namespace: "ns", SecretName: "certs", DNSNames: []string{"svc.ns.svc"},
		CAValidity: time.Hour * 100, CertValidity: time.Hour * 10, RenewBefore: 1.0 / 3, Store: &Store{}, Log: slog.New(slog.DiscardHandler)}
	err := m.Sync(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the chart creates it") {
		t.Errorf("Sync with no Secret and no right to create one: %v, want an error saying the chart creates it", err)
	}
	if m.Store.Ready() {
		t.Error("a certificate is served although none was stored")
	}
}
