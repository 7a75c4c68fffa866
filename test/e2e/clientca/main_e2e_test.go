//go:build e2e

// Package clientca tests the webhook's --client-ca against a real
// kube-apiserver that presents a client certificate to the webhooks it calls
// (harness.Options.WebhookClientCert), so it has a control plane of its own.
package clientca

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

func TestMain(m *testing.M) {
	// Also run before the re-exec into the network namespace; only the copy
	// made inside it is used, consistently with its Options.
	client, err := apiserverClientCert()
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientca:", err)
		os.Exit(1)
	}
	opts := harness.Options{NoDNS: true, WebhookClientCert: &client}
	harness.MainWithControlPlane(m, opts, func(_ context.Context, c *harness.ControlPlane) error {
		cp = c
		return nil
	})
}
