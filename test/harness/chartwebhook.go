package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// ChartWebhook is what the rendered chart configures admission with.
type ChartWebhook struct {
	// Args are the webhook container's arguments that say what admission
	// does (finalizer, startup taint, the agent's keys and placement, the
	// agents' Service whose slices it names); the
	// harness gives the rest (addresses, credentials, certificates).
	Args []string
	// Config is the chart's MutatingWebhookConfiguration, calling a URL
	// instead of the in-cluster Service.
	Config *admissionregistrationv1.MutatingWebhookConfiguration
	// DaemonSet is the agent's DaemonSet from the same render.
	DaemonSet *appsv1.DaemonSet
}

// admissionFlags are the webhook flags ChartWebhook keeps.
var admissionFlags = []string{"--finalizer=", "--legacy-finalizers=", "--inject-startup-taint=", "--agent-placement=",
	"--karpenter-readiness-keys=", "--autoscaler=", "--agent-startup-taint=", "--agent-unhealthy-taint=", "--previous-taint-keys=",
	"--check.network.peer-service="}

// RenderChartWebhook renders the chart (release ChartRelease in namespace)
// with values (YAML, may be empty) and set (--set), and returns its webhook
// arguments and configuration, the configuration calling url.
func (cp *ControlPlane) RenderChartWebhook(ctx context.Context, namespace, url, values string, set ...string) (*ChartWebhook, error) {
	chart, err := ChartDir()
	if err != nil {
		return nil, err
	}
	file := filepath.Join(cp.Dir, "chart-webhook-values.yaml")
	if err := os.WriteFile(file, []byte(values+"\n"), 0o644); err != nil {
		return nil, err
	}
	args := []string{"template", ChartRelease, chart, "--namespace", namespace, "--values", file}
	for _, v := range set {
		args = append(args, "--set", v)
	}
	rendered, err := cp.Helm(ctx, args...)
	if err != nil {
		return nil, err
	}
	out := &ChartWebhook{}
	for _, doc := range strings.Split(rendered, "\n---") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("rendered chart: %w", err)
		}
		switch {
		case head.Kind == "MutatingWebhookConfiguration":
			out.Config = &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := yaml.Unmarshal([]byte(doc), out.Config); err != nil {
				return nil, err
			}
			for i := range out.Config.Webhooks {
				out.Config.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptr.To(url)}
			}
		case head.Kind == "DaemonSet":
			out.DaemonSet = &appsv1.DaemonSet{}
			if err := yaml.Unmarshal([]byte(doc), out.DaemonSet); err != nil {
				return nil, err
			}
		case head.Kind == "Deployment" && strings.HasSuffix(head.Metadata.Name, "-webhook"):
			var d appsv1.Deployment
			if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
				return nil, err
			}
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				for _, f := range admissionFlags {
					if strings.HasPrefix(a, f) {
						out.Args = append(out.Args, a)
					}
				}
			}
		}
	}
	if out.Config == nil || out.DaemonSet == nil || out.Args == nil {
		return nil, fmt.Errorf("the rendered chart lacks the webhook configuration, the agent DaemonSet or the webhook Deployment")
	}
	return out, nil
}
