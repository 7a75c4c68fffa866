//go:build e2e

package chart_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/certs"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// clientFor is a clientset authenticating with kubeconfig.
func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// denied reports whether err is the API server refusing a request: RBAC
// (Forbidden) or an admission policy (Invalid or Forbidden).
func denied(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
}

// neverCalled is an object selector no node matches, so the configuration
// the test registers never sends admission requests.
var neverCalled = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: "privilege-test/never", Operator: metav1.LabelSelectorOpExists},
}}

// TestWebhookWritesOnlyItsCABundleAndItsSecret: with the chart's RBAC and
// admission policies, the webhook's ServiceAccount may change the caBundle
// of its own MutatingWebhookConfiguration and nothing else in it (not the
// rules: a webhook that rewrites them could mutate every pod of the
// cluster), and may read and update the Secret the chart created for its
// certificates but create none (a service-account-token Secret would mint a
// token for any ServiceAccount of its namespace). The real webhook still
// fills the Secret and writes the caBundle under those limits.
func TestWebhookWritesOnlyItsCABundleAndItsSecret(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-webhook"
	if err := cp.ApplyChartRBAC(ctx, ns); err != nil {
		t.Fatal(err)
	}
	mwcs := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	const ip = "10.213.0.61"
	if _, err := mwcs.Create(ctx, harness.WebhookConfig(harness.WebhookConfigName, "https://"+net.JoinHostPort(ip, "8443")+"/mutate-node", neverCalled, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mwcs.Delete(context.Background(), harness.WebhookConfigName, metav1.DeleteOptions{}) })
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	webhook := clientFor(t, kubeconfig)
	own := webhook.AdmissionregistrationV1().MutatingWebhookConfigurations()
	dryRun := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	change := func(edit func(*admissionregistrationv1.MutatingWebhookConfiguration)) error {
		cfg, err := own.Get(ctx, harness.WebhookConfigName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(cfg)
		_, err = own.Update(ctx, cfg, dryRun)
		return err
	}
	allPods := func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
		c.Webhooks[0].Rules[0].Resources = []string{"pods"}
		c.Webhooks[0].Rules[0].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
		c.Webhooks[0].ObjectSelector = nil
	}
	// The policy is compiled asynchronously: wait until it denies.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return denied(change(allPods)), nil
	}); err != nil {
		t.Errorf("the webhook's ServiceAccount may still rewrite its configuration's rules to every pod: %v", change(allPods))
	}

	t.Run("nothing but the caBundle of its configuration", func(t *testing.T) {
		for what, edit := range map[string]func(*admissionregistrationv1.MutatingWebhookConfiguration){
			"rules": allPods,
			"failure policy": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].FailurePolicy = ptr.To(admissionregistrationv1.Fail)
			},
			"url": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].ClientConfig.URL = ptr.To("https://evil.example:443/")
			},
			"object selector": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].ObjectSelector = &metav1.LabelSelector{}
			},
			"namespace selector": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].NamespaceSelector = neverCalled
			},
			"timeout": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].TimeoutSeconds = ptr.To[int32](30)
			},
			"side effects": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].SideEffects = ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun)
			},
			"reinvocation policy": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].ReinvocationPolicy = ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy)
			},
			"match policy": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].MatchPolicy = ptr.To(admissionregistrationv1.Exact)
			},
			"match conditions": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "x", Expression: "true"}}
			},
			"review versions": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].AdmissionReviewVersions = []string{"v1", "v1beta1"}
			},
			"another webhook": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				w := c.Webhooks[0].DeepCopy()
				w.Name = "pods.evil.example"
				w.Rules[0].Resources = []string{"pods"}
				c.Webhooks = append(c.Webhooks, *w)
			},
			"renamed webhook": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Webhooks[0].Name = "pods.evil.example"
			},
			"no webhook": func(c *admissionregistrationv1.MutatingWebhookConfiguration) { c.Webhooks = nil },
			"label":      func(c *admissionregistrationv1.MutatingWebhookConfiguration) { c.Labels = map[string]string{"x": "y"} },
			"annotation": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Annotations = map[string]string{"cert-manager.io/inject-ca-from": "kube-system/evil"}
			},
			"finalizer": func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
				c.Finalizers = []string{"example.com/keep"}
			},
		} {
			if err := change(edit); !denied(err) {
				t.Errorf("the webhook changing its configuration's %s: err = %v, want denied", what, err)
			}
		}
		bundle := func(c *admissionregistrationv1.MutatingWebhookConfiguration) {
			c.Webhooks[0].ClientConfig.CABundle = []byte("-----BEGIN CERTIFICATE-----\n")
		}
		if err := change(bundle); err != nil {
			t.Errorf("the webhook writing its caBundle: %v", err)
		}
		other := harness.WebhookConfig("privilege-other", "https://"+net.JoinHostPort(ip, "8443")+"/mutate-node", neverCalled, nil)
		if _, err := mwcs.Create(ctx, other, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mwcs.Delete(context.Background(), other.Name, metav1.DeleteOptions{}) })
		if _, err := own.Update(ctx, other, dryRun); !denied(err) {
			t.Errorf("the webhook updating another configuration: err = %v, want denied", err)
		}
	})

	t.Run("no Secret created, only its own read and updated", func(t *testing.T) {
		secrets := webhook.CoreV1().Secrets(ns)
		create := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		token := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "minted", Annotations: map[string]string{corev1.ServiceAccountNameKey: harness.WebhookServiceAccount}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}
		if _, err := secrets.Create(ctx, token, create); !denied(err) {
			t.Errorf("the webhook creating a service-account-token Secret: err = %v, want denied", err)
		}
		plain := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: harness.WebhookServiceAccount + "-tls"}}
		if _, err := secrets.Create(ctx, plain, create); !denied(err) {
			t.Errorf("the webhook creating a Secret: err = %v, want denied", err)
		}
		if _, err := secrets.List(ctx, metav1.ListOptions{}); !denied(err) {
			t.Errorf("the webhook listing Secrets: err = %v, want denied", err)
		}
		mine, err := secrets.Get(ctx, harness.WebhookCertSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the webhook reading the Secret the chart created for it: %v", err)
		}
		if _, err := secrets.Update(ctx, mine, dryRun); err != nil {
			t.Errorf("the webhook updating the Secret the chart created for it: %v", err)
		}
	})

	t.Run("the webhook fills its Secret and writes its caBundle", func(t *testing.T) {
		w := cp.StartWebhook(t, "privilege-webhook", ip,
			"--kubeconfig="+kubeconfig, "--namespace="+ns, "--pod-name=privilege-webhook",
			"--webhook-config-name="+harness.WebhookConfigName, "--extra-sans="+ip,
			"--backfill=false", "--cleanup=false")
		w.WaitReady(t, 30*time.Second)
		var cfg *admissionregistrationv1.MutatingWebhookConfiguration
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			cfg, err = mwcs.Get(ctx, harness.WebhookConfigName, metav1.GetOptions{})
			return err == nil && strings.Contains(string(cfg.Webhooks[0].ClientConfig.CABundle), "BEGIN CERTIFICATE"), nil
		}); err != nil {
			t.Fatalf("the webhook never wrote its caBundle: %v\n%s", err, w.Tail(20))
		}
		sec, err := cp.Client.CoreV1().Secrets(ns).Get(ctx, harness.WebhookCertSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if string(sec.Data["ca-bundle.crt"]) != string(cfg.Webhooks[0].ClientConfig.CABundle) {
			t.Errorf("the caBundle written is not the bundle in the Secret the chart created")
		}
		if logged := w.Tail(200); strings.Contains(logged, "forbidden") || strings.Contains(logged, "denied request") {
			t.Errorf("the webhook was refused something:\n%s", logged)
		}
	})
}

// TestSelfManagedSecretFromUpgradeToUninstall: the Secret the chart creates
// for the webhook's certificates is filled by the webhook (as the Deployment
// runs it, with the release's RBAC and policy), whose caBundle the API
// server then trusts; helm upgrade keeps what the webhook wrote; helm
// uninstall leaves no Secret.
func TestSelfManagedSecretFromUpgradeToUninstall(t *testing.T) {
	ctx := t.Context()
	const rel, ns, ip = "up", "privilege-upgrade", "10.213.0.62"
	name := rel + "-kube-node-ready-webhook"
	secrets := cp.Client.CoreV1().Secrets(ns)
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := helm(t, "install", rel, chart, "-n", ns); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}

	// The webhook with the Deployment's certificate arguments, under the release's identity.
	dep, err := cp.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range dep.Spec.Template.Spec.Containers[0].Args {
		for _, p := range []string{"--cert-", "--ca-validity=", "--webhook-config-name=", "--service-name="} {
			if strings.HasPrefix(a, p) {
				args = append(args, a)
			}
		}
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	w := cp.StartWebhook(t, "upgrade-webhook", ip, append(args, "--kubeconfig="+kubeconfig, "--namespace="+ns,
		"--pod-name=upgrade-webhook", "--extra-sans="+ip, "--backfill=false", "--cleanup=false")...)
	w.WaitReady(t, 30*time.Second)
	var filled *corev1.Secret
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		filled, err = secrets.Get(ctx, name+"-certs", metav1.GetOptions{})
		return err == nil && len(filled.Data[certs.SecretCACert]) > 0, nil
	}); err != nil {
		t.Fatalf("the webhook never filled the chart's Secret: %v\n%s", err, w.Tail(20))
	}
	bundle := func() []byte {
		cfg, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Webhooks[0].ClientConfig.CABundle
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return bytes.Equal(bundle(), filled.Data[certs.SecretBundle]), nil
	}); err != nil {
		t.Fatalf("caBundle never written: %v\n%s", err, w.Tail(20))
	}

	if out, err := helm(t, "upgrade", rel, chart, "-n", ns, "--reuse-values"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	after, err := secrets.Get(ctx, name+"-certs", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{certs.SecretCACert, certs.SecretCAKey, certs.SecretBundle, certs.SecretCert, certs.SecretKey} {
		if !bytes.Equal(after.Data[k], filled.Data[k]) {
			t.Errorf("helm upgrade changed %s in the Secret the webhook filled", k)
		}
	}
	if !bytes.Equal(bundle(), filled.Data[certs.SecretBundle]) {
		t.Error("helm upgrade changed the caBundle the webhook wrote")
	}
	if err := w.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	helmWithHooks(t, ns, "uninstall", rel, "-n", ns, "--timeout", "60s")
	left, err := secrets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range left.Items {
		t.Errorf("Secret %s left after helm uninstall", s.Name)
	}
}

// TestAgentReadsPodsOnlyWithTheDaemonSetGate: with the chart's RBAC, the
// agent's ServiceAccount (a token bound to a pod on its node, as the kubelet
// projects it) may list pods and DaemonSets only while the DaemonSet gate is
// enabled (agent.gates.daemonSets.enabled), and then, as RBAC cannot say
// "only on your node", those of every node (docs/agent.md says so); never
// Secrets, ConfigMaps, pod logs, exec, or the kubelet's API.
func TestAgentReadsPodsOnlyWithTheDaemonSetGate(t *testing.T) {
	ctx := t.Context()
	const ns = "privilege-agent"
	node, err := cp.CreateNode(ctx, "privilege-agent-node", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	never := []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "secrets"},
		{Verb: "get", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "list", Resource: "configmaps"},
		{Verb: "get", Resource: "pods", Subresource: "log", Namespace: "kube-system"},
		{Verb: "create", Resource: "pods", Subresource: "exec", Namespace: "kube-system"},
		{Verb: "create", Resource: "pods", Namespace: ns},
		{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: ns},
		{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: node.Name},
		{Verb: "get", Resource: "nodes", Subresource: "pods", Name: node.Name},
		{Verb: "list", Resource: "replicasets", Group: "apps"},
	}
	gate := []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "pods"},
		{Verb: "watch", Resource: "pods"},
		{Verb: "list", Resource: "daemonsets", Group: "apps"},
		{Verb: "watch", Resource: "daemonsets", Group: "apps"},
	}
	for _, tc := range []struct {
		name string
		set  []string
		gate bool
	}{
		{"gate off", []string{"agent.gates.daemonSets.enabled=false"}, false},
		{"gate on (default)", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agent := agentWithChartRBAC(t, ns, node.Name, tc.set...)
			allowed := func(a authorizationv1.ResourceAttributes) bool {
				r, err := agent.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
					Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a},
				}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return r.Status.Allowed
			}
			// RBAC changes reach the authorizer asynchronously.
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				return allowed(gate[0]) == tc.gate, nil
			}); err != nil {
				t.Fatalf("list pods allowed = %v, want %v", !tc.gate, tc.gate)
			}
			for _, a := range gate {
				if got := allowed(a); got != tc.gate {
					t.Errorf("%s %s/%s: allowed = %v, want %v", a.Verb, a.Group, a.Resource, got, tc.gate)
				}
			}
			for _, a := range never {
				if allowed(a) {
					t.Errorf("%s %s/%s %s in %q: allowed, want denied", a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace)
				}
			}
			// What the gate's watch asks for, and what it does not ask for but may read.
			onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name}
			if _, err := agent.CoreV1().Pods("").List(ctx, onNode); (err == nil) != tc.gate {
				t.Errorf("listing the pods on its node: err = %v, want allowed %v", err, tc.gate)
			}
			if _, err := agent.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); (err == nil) != tc.gate {
				t.Errorf("listing every pod: err = %v, want allowed %v (RBAC cannot restrict it to a node)", err, tc.gate)
			}
		})
	}
}

// agentWithChartRBAC applies the chart's RBAC and policies rendered with
// the values set, and returns a client with an agent token bound to a pod
// on node: what the agent there may do.
func agentWithChartRBAC(t *testing.T, ns, node string, set ...string) *kubernetes.Clientset {
	t.Helper()
	ctx := t.Context()
	if err := cp.ApplyChartRBAC(ctx, ns, set...); err != nil {
		t.Fatal(err)
	}
	token, err := cp.NodeToken(ctx, ns, harness.AgentServiceAccount, node)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := cp.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	return agent
}
