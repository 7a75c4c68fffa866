package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
)

// Keys of the Secret a self-managed webhook keeps its PKI in. tls.crt,
// tls.key and ca.crt are what cert-manager would write, so the same volume
// layout works in both modes.
const (
	SecretCACert = "ca.crt"
	SecretCAKey  = "ca.key"
	SecretBundle = "ca-bundle.crt"
	SecretCert   = corev1.TLSCertKey
	SecretKey    = corev1.TLSPrivateKeyKey
)

// managedBy labels the Secrets the webhook itself created (before the chart
// created them), so it only ever deletes one of its own.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByUs    = "kube-node-ready-webhook"
)

// SelfManaged keeps a CA and a serving certificate in a Secret, renews both
// ahead of expiry, puts the CA bundle into a MutatingWebhookConfiguration and
// the serving certificate into a Store. Replicas share the Secret: whoever
// writes first wins, the others adopt what was written (updates guarded by
// resourceVersion and retried on conflict). The Secret is meant to exist
// already, created empty by whoever grants the webhook its permissions (the
// chart), so the webhook needs no right to create Secrets; it creates one
// only when it is missing and the webhook is allowed to.
type SelfManaged struct {
	// Client talks to the API server.
	Client kubernetes.Interface
	// Namespace and SecretName locate the Secret.
	Namespace, SecretName string
	// DNSNames and IPs go into the serving certificate.
	DNSNames []string
	IPs      []net.IP
	// CAValidity and CertValidity are the lifetimes of new certificates.
	CAValidity, CertValidity time.Duration
	// RenewBefore is the fraction of a certificate's lifetime left at which it is renewed.
	RenewBefore float64
	// WebhookConfigName is the MutatingWebhookConfiguration whose webhooks get
	// the CA bundle; empty leaves it to someone else.
	WebhookConfigName string
	// Store receives the serving certificate.
	Store *Store
	// Log receives what changed.
	Log *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Run syncs at once and then every interval until ctx ends, retrying
// failures sooner with backoff.
func (m *SelfManaged) Run(ctx context.Context, interval time.Duration) {
	wait := time.Duration(0)
	backoff := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if err := m.Sync(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			m.Log.Error("certificate sync failed", "error", err, "retry_in_seconds", backoff.Seconds())
			wait = backoff
			backoff = min(backoff*2, interval)
			continue
		}
		wait, backoff = interval, time.Second
	}
}

// Sync makes the Secret hold a valid CA and serving certificate, writes the
// CA bundle into the webhook configuration, and installs the serving
// certificate. The certificate is installed even if the configuration could
// not be written, so a webhook whose configuration does not exist yet serves.
func (m *SelfManaged) Sync(ctx context.Context) error {
	data, err := m.ensureSecret(ctx)
	if err != nil {
		return err
	}
	var injectErr error
	if m.WebhookConfigName != "" {
		injectErr = m.injectCABundle(ctx, data[SecretBundle])
	}
	pair, err := tls.X509KeyPair(data[SecretCert], data[SecretKey])
	if err != nil {
		return fmt.Errorf("certs: serving certificate in secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	if cur := m.Store.Certificate(); cur == nil || !bytes.Equal(cur.Certificate[0], pair.Certificate[0]) {
		m.Store.SetCertificate(&pair)
		m.Log.Info("serving certificate installed", "secret", m.Namespace+"/"+m.SecretName, "not_after", pair.Leaf.NotAfter, "serial", pair.Leaf.SerialNumber.String())
	}
	return injectErr
}

func (m *SelfManaged) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// ensureSecret returns the Secret's data after making it current.
func (m *SelfManaged) ensureSecret(ctx context.Context) (map[string][]byte, error) {
	secrets := m.Client.CoreV1().Secrets(m.Namespace)
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		sec, err := secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			data, err := m.create(ctx)
			if apierrors.IsAlreadyExists(err) {
				lastErr = err
				continue // another replica won; adopt its Secret
			}
			return data, err
		}
		if err != nil {
			return nil, fmt.Errorf("certs: get secret %s/%s: %w", m.Namespace, m.SecretName, err)
		}
		data, changed, err := m.desired(sec.Data)
		if err != nil {
			return nil, err
		}
		if !changed {
			return data, nil
		}
		sec.Data = data
		_, err = secrets.Update(ctx, sec, metav1.UpdateOptions{FieldManager: api.FieldManagerWebhook})
		if err == nil {
			m.Log.Info("certificate secret renewed", "secret", m.Namespace+"/"+m.SecretName)
			return data, nil
		}
		if apierrors.IsConflict(err) {
			lastErr = err
			continue // another replica renewed first; look again
		}
		return nil, fmt.Errorf("certs: update secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	return nil, fmt.Errorf("certs: secret %s/%s kept changing under us: %w", m.Namespace, m.SecretName, lastErr)
}

// create creates the missing Secret with a new PKI. The chart creates the
// Secret and grants no right to create one, so there this fails with an
// error that says so.
func (m *SelfManaged) create(ctx context.Context) (map[string][]byte, error) {
	data, _, err := m.desired(nil)
	if err != nil {
		return nil, err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.SecretName, Namespace: m.Namespace, Labels: map[string]string{managedByLabel: managedByUs}},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	_, err = m.Client.CoreV1().Secrets(m.Namespace).Create(ctx, sec, metav1.CreateOptions{FieldManager: api.FieldManagerWebhook})
	switch {
	case err == nil:
		m.Log.Info("certificate secret created", "secret", m.Namespace+"/"+m.SecretName)
		return data, nil
	case apierrors.IsAlreadyExists(err):
		return nil, err
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("certs: secret %s/%s does not exist and the webhook may not create it (the chart creates it empty): %w", m.Namespace, m.SecretName, err)
	default:
		return nil, fmt.Errorf("certs: create secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
}

// desired returns the Secret data that should be stored given what is, and
// whether it differs. It is the whole renewal policy.
func (m *SelfManaged) desired(cur map[string][]byte) (map[string][]byte, bool, error) {
	now := m.now()
	out := map[string][]byte{}
	for k, v := range cur {
		out[k] = v
	}
	changed := false
	ca := KeyPair{CertPEM: cur[SecretCACert], KeyPEM: cur[SecretCAKey]}
	caCert, caErr := validCA(ca)
	if caErr != nil || NeedsRenewal(caCert, now, m.RenewBefore) {
		newCA, err := NewCA("kube-node-ready-webhook-ca", now, m.CAValidity)
		if err != nil {
			return nil, false, err
		}
		old := cur[SecretBundle]
		if len(old) == 0 {
			old = cur[SecretCACert]
		}
		bundle, err := MergeBundle(newCA.CertPEM, old, now)
		if err != nil {
			return nil, false, err
		}
		ca = newCA
		caCert, _ = ParseCert(newCA.CertPEM)
		out[SecretCACert], out[SecretCAKey], out[SecretBundle] = newCA.CertPEM, newCA.KeyPEM, bundle
		changed = true
		delete(out, SecretCert) // a new CA means a new serving certificate
	}
	if b, err := parseAll(out[SecretBundle]); err != nil || !b[0].Equal(caCert) {
		bundle, err := MergeBundle(out[SecretCACert], out[SecretBundle], now)
		if err != nil {
			return nil, false, err
		}
		out[SecretBundle] = bundle
		changed = true
	}
	if !m.servingOK(out[SecretCert], out[SecretKey], caCert, now) {
		serving, err := NewServing(ca, m.DNSNames, m.IPs, now, m.CertValidity)
		if err != nil {
			return nil, false, err
		}
		out[SecretCert], out[SecretKey] = serving.CertPEM, serving.KeyPEM
		changed = true
	}
	return out, changed, nil
}

func validCA(ca KeyPair) (*x509.Certificate, error) {
	if _, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM); err != nil {
		return nil, err
	}
	c, err := ParseCert(ca.CertPEM)
	if err != nil {
		return nil, err
	}
	if !c.IsCA {
		return nil, errors.New("certs: ca.crt is not a CA")
	}
	return c, nil
}

// servingOK reports whether the stored serving certificate can stay: it
// loads with its key, chains to the current CA, names everything it must and
// is not due for renewal.
func (m *SelfManaged) servingOK(certPEM, keyPEM []byte, ca *x509.Certificate, now time.Time) bool {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false
	}
	leaf := pair.Leaf
	if leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	return Covers(leaf, m.DNSNames, m.IPs) && !NeedsRenewal(leaf, now, m.RenewBefore)
}

// injectCABundle writes bundle into every webhook of the configuration.
func (m *SelfManaged) injectCABundle(ctx context.Context, bundle []byte) error {
	cfgs := m.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := cfgs.Get(ctx, m.WebhookConfigName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("certs: get mutatingwebhookconfiguration %s: %w", m.WebhookConfigName, err)
		}
		changed := false
		for i := range cfg.Webhooks {
			if !bytes.Equal(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if _, err := cfgs.Update(ctx, cfg, metav1.UpdateOptions{FieldManager: api.FieldManagerWebhook}); err != nil {
			// Wrapped, a conflict is still one to RetryOnConflict (errors.As).
			return fmt.Errorf("certs: update mutatingwebhookconfiguration %s: %w", m.WebhookConfigName, err)
		}
		m.Log.Info("ca bundle written", "mutatingwebhookconfiguration", m.WebhookConfigName, "webhooks", len(cfg.Webhooks))
		return nil
	})
}
