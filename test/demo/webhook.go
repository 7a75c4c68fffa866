package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
	"github.com/kube-node-ready/kube-node-ready/test/webhookenv"
)

const (
	webhookIP     = "10.213.0.40"
	webhookConfig = "kube-node-ready-webhook"
	webhookNS     = "kube-node-ready"
)

// startWebhook runs the webhook binary with self-managed certificates: it
// creates its CA and serving certificate and writes the caBundle into the
// MutatingWebhookConfiguration registered here, as the chart's would be.
func startWebhook(ctx context.Context, cp *harness.ControlPlane) (*harness.Process, error) {
	kubeconfig, err := webhookenv.InstallRBAC(ctx, cp, webhookNS, webhookConfig)
	if err != nil {
		return nil, err
	}
	mwc := webhookenv.WebhookConfig(webhookConfig, "https://"+webhookIP+":8443/mutate-node", nil, nil)
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, mwc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	root, err := harness.RepoRoot()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--listen-address=" + webhookIP + ":8443", "--metrics-address=" + webhookIP + ":8080",
		"--kubeconfig=" + kubeconfig, "--namespace=" + webhookNS, "--extra-sans=" + webhookIP,
		"--webhook-config-name=" + webhookConfig,
	}
	args = append(args, cleanupArgs(cp)...)
	p, err := harness.StartProcess(cp.Dir, "webhook", filepath.Join(root, "bin", "kube-node-ready-webhook"), args, nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: time.Second}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, p.ExitError()
		}
		resp, err := hc.Get("http://" + webhookIP + ":8080/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.Stop(5 * time.Second)
		return nil, fmt.Errorf("webhook not ready: %w", err)
	}
	// The caBundle lands within the webhook's first certificate sync.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{})
		return err == nil && len(got.Webhooks[0].ClientConfig.CABundle) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("webhook never wrote its caBundle: %w", err)
	}
	log.Printf("webhook ready on %s:8443 with a self-managed certificate", webhookIP)
	return p, nil
}

// deleteAndWatchCleanup deletes a node and shows its finalizers until it is gone.
func deleteAndWatchCleanup(ctx context.Context, cp *harness.ControlPlane, name string) error {
	if err := cp.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			fmt.Printf("%s  %s is gone\n", time.Now().Format("15:04:05"), name)
			return true, nil
		}
		if err != nil {
			return false, err
		}
		s := fmt.Sprintf("%s: deletionTimestamp=%v finalizers=%v", name, n.DeletionTimestamp != nil, n.Finalizers)
		if s != last {
			fmt.Printf("%s  %s\n", time.Now().Format("15:04:05"), s)
			last = s
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(cp.Dir, "webhook.log"))
	if err != nil {
		return err
	}
	fmt.Println("webhook log lines about it:")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, `"`+name+`"`) {
			fmt.Println("  " + line)
		}
	}
	return nil
}
