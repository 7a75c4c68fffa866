//go:build e2e

package chart_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// npNamespace is the namespace the NetworkPolicy renderings are for.
const npNamespace = "netpol"

// rendered is what the flows of one rendering are derived from.
type rendered struct {
	policies []networkingv1.NetworkPolicy
	agent    *appsv1.DaemonSet
	webhook  *appsv1.Deployment
	services []corev1.Service
	mwc      *admissionregistrationv1.MutatingWebhookConfiguration
	monitors []serviceMonitor
}

// serviceMonitor is what a rendered ServiceMonitor says about scraping.
type serviceMonitor struct {
	Spec struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port string `json:"port"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// parseRendered reads the objects of a helm template output.
func parseRendered(out string) (rendered, error) {
	var r rendered
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return r, err
		}
		switch tm.Kind {
		case "NetworkPolicy":
			var p networkingv1.NetworkPolicy
			err = yaml.UnmarshalStrict(doc, &p)
			r.policies = append(r.policies, p)
		case "DaemonSet":
			r.agent = &appsv1.DaemonSet{}
			err = yaml.Unmarshal(doc, r.agent)
		case "Deployment":
			r.webhook = &appsv1.Deployment{}
			err = yaml.Unmarshal(doc, r.webhook)
		case "Service":
			var s corev1.Service
			err = yaml.Unmarshal(doc, &s)
			r.services = append(r.services, s)
		case "MutatingWebhookConfiguration":
			r.mwc = &admissionregistrationv1.MutatingWebhookConfiguration{}
			err = yaml.Unmarshal(doc, r.mwc)
		case "ServiceMonitor":
			var sm serviceMonitor
			err = yaml.Unmarshal(doc, &sm)
			r.monitors = append(r.monitors, sm)
		}
		if err != nil {
			return r, fmt.Errorf("%s: %w", tm.Kind, err)
		}
	}
}

// nsLabels are the labels the API server gives namespace ns.
func nsLabels(ns string, extra ...string) map[string]string {
	l := map[string]string{corev1.LabelMetadataName: ns}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// podOf is a pod of a workload's template in the release namespace.
func podOf(name, ip string, tmpl corev1.PodTemplateSpec) party {
	return party{name: name, pod: true, namespace: npNamespace, nsLabels: nsLabels(npNamespace),
		labels: tmpl.Labels, ip: netip.MustParseAddr(ip), ports: tmpl.Spec.Containers[0].Ports}
}

// serviceOf is the Service whose selector selects pods labelled l.
func (r rendered) serviceOf(l map[string]string) (corev1.Service, error) {
	for _, s := range r.services {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(l)) {
			return s, nil
		}
	}
	return corev1.Service{}, fmt.Errorf("no Service selects %v", l)
}

// targetPort is the pod port a Service port sends to.
func targetPort(sp corev1.ServicePort, pod party) (int32, error) {
	switch {
	case sp.TargetPort.Type == intstr.String:
		for _, cp := range pod.ports {
			if cp.Name == sp.TargetPort.StrVal {
				return cp.ContainerPort, nil
			}
		}
		return 0, fmt.Errorf("Service port %s: %s has no port named %q", sp.Name, pod.name, sp.TargetPort.StrVal)
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal, nil
	}
	return sp.Port, nil
}

// metricsPorts are the pod ports Prometheus scrapes on pod: those its
// Service's ServiceMonitors name, else its Service's port named metrics.
func (r rendered) metricsPorts(pod party) ([]int32, error) {
	svc, err := r.serviceOf(pod.labels)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, sm := range r.monitors {
		sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("ServiceMonitor selector: %w", err)
		}
		if sel.Matches(labels.Set(svc.Labels)) {
			for _, e := range sm.Spec.Endpoints {
				names = append(names, e.Port)
			}
		}
	}
	if len(r.monitors) > 0 && len(names) == 0 {
		return nil, fmt.Errorf("no ServiceMonitor scrapes Service %s", svc.Name)
	}
	if len(names) == 0 {
		names = []string{"metrics"}
	}
	var ports []int32
	for _, name := range names {
		i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("Service %s has no port named %q", svc.Name, name)
		}
		port, err := targetPort(svc.Spec.Ports[i], pod)
		if err != nil {
			return nil, err
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// promSide is where Prometheus runs in a case: a namespace the
// metricsNamespaceSelector of the case selects.
type promSide struct {
	namespace string
	labels    map[string]string
}

var (
	// apiServer is outside the pod network (host network or a managed
	// control plane): only an ipBlock or an open rule admits it.
	apiServer = party{name: "the API server", ip: netip.MustParseAddr("192.0.2.10")}
	kubeDNS   = party{name: "a kube-dns pod", pod: true, namespace: "kube-system", nsLabels: nsLabels("kube-system"),
		labels: map[string]string{"k8s-app": "kube-dns"}, ip: netip.MustParseAddr("10.244.3.3"),
		ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
			{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9153}}}
	// stranger is a pod no policy of ours means to admit to metrics.
	stranger = party{name: "a pod of another namespace", pod: true, namespace: "elsewhere", nsLabels: nsLabels("elsewhere"),
		labels: map[string]string{"app": "curious"}, ip: netip.MustParseAddr("10.244.4.4")}
)

// flows lists the connections the release needs (want) and some it must
// not allow when its policies are on (deny): agent to agent on the peer
// port, agent to kube-dns and to the API server, the API server to the
// admission port (where a MutatingWebhookConfiguration calls it),
// Prometheus to every metrics port, the webhook to the API server.
func (r rendered) flows(prom promSide, everyNamespace bool) (want, deny []flow, err error) {
	prometheus := party{name: "Prometheus in " + prom.namespace, pod: true, namespace: prom.namespace, nsLabels: prom.labels,
		labels: map[string]string{"app.kubernetes.io/name": "prometheus"}, ip: netip.MustParseAddr("10.244.5.5")}
	tcp := corev1.ProtocolTCP
	if r.agent != nil {
		a, b := podOf("an agent", "10.244.1.1", r.agent.Spec.Template), podOf("another node's agent", "10.244.2.2", r.agent.Spec.Template)
		// The agent dials a peer at the first TCP port of its Service's
		// EndpointSlices (internal/agent/checks: Endpoint.TCPPort).
		svc, err := r.serviceOf(a.labels)
		if err != nil {
			return nil, nil, err
		}
		var peer int32
		for _, sp := range svc.Spec.Ports {
			if sp.Protocol == "" || sp.Protocol == tcp {
				if peer, err = targetPort(sp, b); err != nil {
					return nil, nil, err
				}
				break
			}
		}
		want = append(want,
			flow{"agent to a peer agent (pod-to-pod check)", a, b, peer, tcp},
			flow{"agent to kube-dns over UDP (dns, discovery)", a, kubeDNS, 53, corev1.ProtocolUDP},
			flow{"agent to kube-dns over TCP (pod-to-pod check)", a, kubeDNS, 53, tcp},
			flow{"agent to the API server", a, apiServer, 6443, tcp})
		metrics, err := r.metricsPorts(b)
		if err != nil {
			return nil, nil, err
		}
		for _, port := range metrics {
			want = append(want, flow{"Prometheus to the agent's metrics", prometheus, b, port, tcp})
			if !everyNamespace {
				deny = append(deny, flow{"a pod of an unselected namespace to the agent's metrics", stranger, b, port, tcp})
			}
		}
		deny = append(deny, flow{"a pod of an unselected namespace to a port the agent does not serve", stranger, b, 9999, tcp})
	}
	if r.webhook != nil {
		w := podOf("a webhook pod", "10.244.1.9", r.webhook.Spec.Template)
		want = append(want, flow{"webhook to the API server", w, apiServer, 6443, tcp})
		if r.mwc != nil {
			ref := r.mwc.Webhooks[0].ClientConfig.Service
			if ref == nil || ref.Namespace != npNamespace {
				return nil, nil, fmt.Errorf("the MutatingWebhookConfiguration calls no Service of the release: %+v", r.mwc.Webhooks[0].ClientConfig)
			}
			var port int32
			found := false
			for _, s := range r.services {
				if s.Name != ref.Name {
					continue
				}
				for _, sp := range s.Spec.Ports {
					if ref.Port != nil && sp.Port == *ref.Port {
						if port, err = targetPort(sp, w); err != nil {
							return nil, nil, err
						}
						found = true
					}
				}
			}
			if !found {
				return nil, nil, fmt.Errorf("no port %v of Service %s for the MutatingWebhookConfiguration", ref.Port, ref.Name)
			}
			want = append(want, flow{"the API server to the admission port", apiServer, w, port, tcp})
		}
		metrics, err := r.metricsPorts(w)
		if err != nil {
			return nil, nil, err
		}
		for _, port := range metrics {
			want = append(want, flow{"Prometheus to the webhook's metrics", prometheus, w, port, tcp})
			if !everyNamespace {
				deny = append(deny, flow{"a pod of an unselected namespace to the webhook's metrics", stranger, w, port, tcp})
			}
		}
	}
	return want, deny, nil
}

// TestNetworkPoliciesAllowEveryNeededFlow renders every combination of the
// networkPolicy values (on or off; metricsNamespaceSelector unset, null,
// by label, by expression, naming the release's own namespace) with the
// agent and the webhook each on or off, cleanup (so admission) on or off,
// ServiceMonitors on or off and default or moved ports, and judges the
// flows the release needs against the rendered policies: agent to agent on
// the peer port, agent to kube-dns (53) and to the API server, the API
// server to the admission port, Prometheus (in a namespace the selector
// selects) to every metrics port. Each rendered policy must also be
// accepted by the API server, and, when on, keep out a pod of an unselected
// namespace. What a CNI enforces on real nodes is not tested here.
func TestNetworkPoliciesAllowEveryNeededFlow(t *testing.T) {
	if _, err := cp.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: npNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	monitoring := promSide{"monitoring", nsLabels("monitoring")}
	selectors := []struct {
		name           string
		sets           []string
		prom           promSide
		everyNamespace bool
	}{
		{"selector unset", nil, monitoring, true},
		{"selector null", []string{"--set", "networkPolicy.metricsNamespaceSelector=null"}, monitoring, true},
		{"selector by name", []string{"--set", `networkPolicy.metricsNamespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring`}, monitoring, false},
		{"selector by expression", []string{"--set-json", `networkPolicy.metricsNamespaceSelector={"matchExpressions":[{"key":"team","operator":"In","values":["observability"]}]}`},
			promSide{"obs", nsLabels("obs", "team", "observability")}, false},
		{"selector of the release namespace", []string{"--set", `networkPolicy.metricsNamespaceSelector.matchLabels.kubernetes\.io/metadata\.name=` + npNamespace},
			promSide{npNamespace, nsLabels(npNamespace)}, false},
	}
	components := []struct {
		name string
		sets []string
	}{
		{"agent and webhook", nil},
		{"agent and webhook without cleanup", []string{"--set", "webhook.cleanup.enabled=false", "--set", "webhook.backfill=false"}},
		{"agent only", []string{"--set", "webhook.enabled=false"}},
		{"webhook only", []string{"--set", "agent.enabled=false"}},
		{"webhook only without cleanup", []string{"--set", "agent.enabled=false", "--set", "webhook.cleanup.enabled=false", "--set", "webhook.backfill=false"}},
	}
	monitors := []struct {
		name string
		sets []string
	}{
		{"no ServiceMonitor", nil},
		{"ServiceMonitors", []string{"--set", "monitoring.serviceMonitor.enabled=true"}},
	}
	ports := []struct {
		name string
		sets []string
	}{
		{"default ports", nil},
		{"moved ports", []string{"--set", "agent.metricsPort=9100", "--set", "webhook.metricsPort=9090", "--set", "webhook.webhookPort=9443"}},
	}
	for _, enabled := range []bool{false, true} {
		for _, sel := range selectors {
			if !enabled && sel.sets != nil {
				continue // the selector means nothing without policies
			}
			for _, comp := range components {
				for _, mon := range monitors {
					for _, port := range ports {
						name := fmt.Sprintf("enabled=%t/%s/%s/%s/%s", enabled, sel.name, comp.name, mon.name, port.name)
						args := []string{"template", release, chart, "-n", npNamespace, "--kube-version", "1.36.0",
							"--set", fmt.Sprintf("networkPolicy.enabled=%t", enabled)}
						args = append(args, sel.sets...)
						args = append(args, comp.sets...)
						args = append(args, mon.sets...)
						args = append(args, port.sets...)
						t.Run(name, func(t *testing.T) {
							checkRenderedFlows(t, args, enabled, sel.prom, sel.everyNamespace)
						})
					}
				}
			}
		}
	}
}

// checkRenderedFlows renders the chart with args and judges its flows.
func checkRenderedFlows(t *testing.T, args []string, enabled bool, prom promSide, everyNamespace bool) {
	t.Helper()
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %v: %v\n%s", args, err, out)
	}
	r, err := parseRendered(out)
	if err != nil {
		t.Fatal(err)
	}
	if !enabled {
		if len(r.policies) > 0 {
			t.Fatalf("%d NetworkPolicies rendered with networkPolicy.enabled=false", len(r.policies))
		}
	} else if want := btoi(r.agent != nil) + btoi(r.webhook != nil); len(r.policies) != want {
		t.Errorf("%d NetworkPolicies rendered, want one per component (%d)", len(r.policies), want)
	}
	for _, p := range r.policies {
		if _, err := cp.Client.NetworkingV1().NetworkPolicies(npNamespace).Create(t.Context(), &p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the API server refuses NetworkPolicy %s: %v", p.Name, err)
		}
	}
	want, deny, err := r.flows(prom, everyNamespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range want {
		ok, why, err := allowed(r.policies, f)
		switch {
		case err != nil:
			t.Errorf("%s: %v", f.name, err)
		case !ok:
			t.Errorf("%s (%d/%s) is cut: %s", f.name, f.port, f.protocol, why)
		}
	}
	if !enabled {
		return
	}
	for _, f := range deny {
		if ok, _, err := allowed(r.policies, f); err == nil && ok {
			t.Errorf("%s (%d/%s) is allowed, want it kept out", f.name, f.port, f.protocol)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestMetricsNamespaceSelectorIsALabelSelector: namespace labels given
// where a label selector belongs would be dropped by the API server as
// unknown fields, leaving {} (every namespace); the schema refuses them.
func TestMetricsNamespaceSelectorIsALabelSelector(t *testing.T) {
	for _, set := range []string{
		`networkPolicy.metricsNamespaceSelector.kubernetes\.io/metadata\.name=monitoring`,
		`networkPolicy.metricsNamespaceSelector.matchlabels.team=observability`,
	} {
		out, err := helm(t, "template", release, chart, "-n", npNamespace, "--kube-version", "1.36.0",
			"--set", "networkPolicy.enabled=true", "--set", set)
		if err == nil || !strings.Contains(out, "metricsNamespaceSelector") {
			t.Errorf("helm template --set %s: err=%v, want a schema error naming metricsNamespaceSelector:\n%s", set, err, out)
		}
	}
}
