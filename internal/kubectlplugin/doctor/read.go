package doctor

import (
	"fmt"
	"path"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/flagenv"
)

// What the doctor recognises our workloads by and reads their settings
// from, as deployed: the chart's pod label (docs/install.md: app=kube-node-ready so
// that kubectl logs -l app=kube-node-ready works), the images' names, and
// the binaries' flags with their environment twins (internal/api's, which
// the binaries register). The plugin's other commands find our workloads
// the same way.
const (
	// AgentApp is the pod label app of our agent DaemonSet.
	AgentApp = "kube-node-ready"
	// WebhookApp is the pod label app of our webhook Deployment.
	WebhookApp = "kube-node-ready-webhook"

	instanceLabel  = "app.kubernetes.io/instance"
	managedByLabel = "app.kubernetes.io/managed-by"
	nameLabel      = "app.kubernetes.io/name"
	versionLabel   = "app.kubernetes.io/version"
	chartLabel     = "helm.sh/chart"
)

// helmRelease sets in's Helm release and chart version from the labels
// the chart puts on its workloads; nothing when Helm did not install it.
func helmRelease(in *Install, labels map[string]string) {
	if labels[managedByLabel] != "Helm" {
		return
	}
	in.Release, in.ChartVersion = labels[instanceLabel], chartVersion(labels)
}

// chartVersion is the version of the chart that deployed a workload with
// labels: helm.sh/chart is <chart name>-<version> (the version starts at
// the first "-" before a digit when the name label differs from the
// chart's name); else app.kubernetes.io/version, the chart's appVersion,
// which this project's releases keep equal to its version.
func chartVersion(labels map[string]string) string {
	if c := labels[chartLabel]; c != "" {
		if name := labels[nameLabel]; name != "" && strings.HasPrefix(c, name+"-") {
			return strings.TrimPrefix(c, name+"-")
		}
		for i := 0; i+1 < len(c); i++ {
			if c[i] == '-' && c[i+1] >= '0' && c[i+1] <= '9' {
				return c[i+1:]
			}
		}
	}
	return labels[versionLabel]
}

// IsOurs says whether a pod template belongs to our agent (app ==
// AgentApp) or webhook (WebhookApp), by its app label or, for manifests
// that renamed it, by its image.
func IsOurs(t corev1.PodTemplateSpec, app string) bool {
	if t.Labels["app"] == app {
		return true
	}
	image := map[string]string{AgentApp: "kube-node-ready-agent", WebhookApp: "kube-node-ready-webhook"}[app]
	for _, c := range t.Spec.Containers {
		if imageName(c.Image) == image {
			return true
		}
	}
	return false
}

// imageName is an image reference's last path element without tag or
// digest: registry.k8s.io/autoscaling/cluster-autoscaler:v1.36.0 is
// cluster-autoscaler.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	name := path.Base(ref)
	name, _, _ = strings.Cut(name, ":")
	return name
}

// commandLine is a container's command and args, as the process sees them.
func commandLine(c corev1.Container) []string {
	return append(append([]string(nil), c.Command...), c.Args...)
}

// Setting reads one option of our binaries from a container: the flag
// (under its current name, then its old one) on the command line, else its
// environment twin (current, then old), else def. from says where the
// value came from; a twin set from a ConfigMap or Secret cannot be read
// here and is reported in warning.
func Setting(c corev1.Container, prefix string, def string, names ...string) (value, from, warning string) {
	for _, n := range names {
		if v, ok := LastFlagValue(commandLine(c), n); ok {
			return v, "--" + n, ""
		}
	}
	for _, n := range names {
		env := flagenv.Name(prefix, n)
		for _, e := range c.Env {
			if e.Name != env {
				continue
			}
			if e.ValueFrom != nil {
				assumed := fmt.Sprintf("%q", def)
				if def == "" {
					assumed = "unset"
				}
				return def, "default", fmt.Sprintf("%s of container %s is set from a ConfigMap or Secret, which doctor does not read: assumed %s", env, c.Name, assumed)
			}
			return e.Value, env, ""
		}
	}
	return def, "default", ""
}

// AgentContainer is the container of our agent in a DaemonSet: the one
// named agent, else the first.
func AgentContainer(t corev1.PodTemplateSpec) corev1.Container {
	for _, c := range t.Spec.Containers {
		if c.Name == "agent" {
			return c
		}
	}
	return t.Spec.Containers[0]
}

// readAgent is the installation an agent DaemonSet deploys: its taints,
// and its Helm release for the fixes. Warnings say what could not be read.
func readAgent(ds *appsv1.DaemonSet) (Install, []string) {
	in := Install{Namespace: ds.Namespace, Agent: "DaemonSet " + ds.Namespace + "/" + ds.Name}
	helmRelease(&in, ds.Labels)
	if len(ds.Spec.Template.Spec.Containers) == 0 {
		return in, []string{in.Agent + " has no containers"}
	}
	c := AgentContainer(ds.Spec.Template)
	keys, warnings := AgentTaintKeys(c, in.Agent)
	in.Startup, in.Unhealthy = installTaints(keys)
	warnings = append(warnings, readAgentModes(&in, c)...)
	return in, warnings
}

// AgentTaintKeys resolves the taints of our agent's container c; who
// names its workload in warnings.
func AgentTaintKeys(c corev1.Container, who string) (cli.TaintKeys, []string) {
	keys, _, warnings := readContainerTaintKeys(c, api.AgentEnvPrefix, who, api.StartupTaintFlag, api.UnhealthyTaintFlag)
	return keys, warnings
}

// readContainerTaintKeys resolves the taints a container of our binaries uses, as
// the binary does (cli.TaintFlags): --autoscaler, the startup taint flag,
// the unhealthy one (under its current name, then its old ones) and
// --previous-taint-keys, or their environment twins under prefix. set says
// one of them was given; a value that does not resolve is warned about and
// the default preset's keys assumed. who names the workload in warnings.
func readContainerTaintKeys(c corev1.Container, prefix, who, startupFlag string, unhealthyFlags ...string) (keys cli.TaintKeys, set bool, warnings []string) {
	read := func(def string, names ...string) string {
		v, from, w := Setting(c, prefix, def, names...)
		if w != "" {
			warnings = append(warnings, w)
		}
		set = set || from != "default"
		return v
	}
	f := cli.TaintFlags{
		Autoscaler: read(api.DefaultPreset, api.AutoscalerFlag),
		Startup:    read("", startupFlag),
		Unhealthy:  read("", unhealthyFlags...),
	}
	var previous flagenv.StringList
	_ = previous.Set(read("", api.PreviousTaintKeysFlag)) // Set never fails
	f.Previous = previous
	keys, err := f.Resolve()
	if err != nil {
		warnings = append(warnings, fmt.Sprintf("%s: %v: assumed the %s preset's keys", who, err, api.DefaultPreset))
		keys, _ = cli.TaintFlags{Autoscaler: api.DefaultPreset}.Resolve()
	}
	return keys, set, warnings
}

// installTaints are the startup and unhealthy taints of keys, which
// Resolve has checked.
func installTaints(keys cli.TaintKeys) (startup, unhealthy Taint) {
	startup, _ = ParseTaint(keys.Startup)
	unhealthy, _ = ParseTaint(keys.Unhealthy)
	return startup, unhealthy
}

// webhookKeys are the agent taints a webhook's remediation watches
// (--agent-startup-taint, --agent-unhealthy-taint); set says the webhook's
// command line or environment names them (the chart does with remediation on).
type webhookKeys struct {
	startup, unhealthy Taint
	set                bool
}

// readWebhook adds the webhook Deployment's remediation settings to in and
// returns the agent taints it watches.
func readWebhook(in *Install, d *appsv1.Deployment) (webhookKeys, []string) {
	in.Webhook = "Deployment " + d.Namespace + "/" + d.Name
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return webhookKeys{}, []string{in.Webhook + " has no containers"}
	}
	c := d.Spec.Template.Spec.Containers[0]
	var warnings []string
	warn := func(w string) {
		if w != "" {
			warnings = append(warnings, w)
		}
	}
	var w string
	in.Remediation, _, w = Setting(c, api.WebhookEnvPrefix, "off", api.RemediationFlag)
	warn(w)
	inject, _, w := Setting(c, api.WebhookEnvPrefix, "false", api.InjectStartupTaintFlag)
	warn(w)
	readiness, _, w := Setting(c, api.WebhookEnvPrefix, "true", api.KarpenterReadinessKeysFlag)
	warn(w)
	in.InjectsReadinessKey = inject == "true" && readiness == "true"
	taints, set, ws := readContainerTaintKeys(c, api.WebhookEnvPrefix, in.Webhook, api.AgentStartupTaintFlag, api.AgentUnhealthyTaintFlag)
	warnings = append(warnings, ws...)
	preset, _, _ := Setting(c, api.WebhookEnvPrefix, api.DefaultPreset, api.AutoscalerFlag) // warned about above
	def := api.DefaultUnverifiedDeadline(preset)
	v, from, w := Setting(c, api.WebhookEnvPrefix, def.String(), api.UnverifiedDeadlineFlag)
	warn(w)
	deadline, err := time.ParseDuration(v)
	if err != nil {
		warn(fmt.Sprintf("%s: %s=%s: %v", in.Webhook, from, v, err))
		deadline = def
	}
	in.UnverifiedDeadline = deadline
	keys := webhookKeys{set: set}
	keys.startup, keys.unhealthy = installTaints(taints)
	return keys, warnings
}

// keyMismatch says, when a webhook watches other keys than its agent
// writes, that remediation misses the agent's nodes; "" when they agree.
func keyMismatch(in Install, k webhookKeys) string {
	if !k.set || in.Remediation == "" || in.Remediation == "off" ||
		(k.startup.Key == in.Startup.Key && k.unhealthy.Key == in.Unhealthy.Key) {
		return ""
	}
	return fmt.Sprintf("%s watches --agent-startup-taint=%s --agent-unhealthy-taint=%s, but %s writes %s and %s: "+
		"remediation does not see the nodes the agent holds; give both the same keys", in.Webhook, k.startup, k.unhealthy, in.Agent, in.Startup, in.Unhealthy)
}

// webhookOf is the webhook Deployment of the installation whose agent is
// ds: ours, in the same namespace, of the same Helm release when both
// say one. nil when there is none.
func webhookOf(ds *appsv1.DaemonSet, deps []appsv1.Deployment) *appsv1.Deployment {
	for i := range deps {
		d := &deps[i]
		if d.Namespace != ds.Namespace || !IsOurs(d.Spec.Template, WebhookApp) {
			continue
		}
		if a, b := ds.Labels[instanceLabel], d.Labels[instanceLabel]; a != "" && b != "" && a != b {
			continue
		}
		return d
	}
	return nil
}

// isClusterAutoscaler says whether a container runs Cluster Autoscaler:
// its image or its program is named cluster-autoscaler.
func isClusterAutoscaler(c corev1.Container) bool {
	if strings.HasPrefix(imageName(c.Image), "cluster-autoscaler") {
		return true
	}
	line := commandLine(c)
	return len(line) > 0 && path.Base(line[0]) == "cluster-autoscaler"
}

// readClusterAutoscaler reads the Cluster Autoscaler a Deployment runs;
// ok is false when it runs none.
func readClusterAutoscaler(d *appsv1.Deployment) (c ClusterAutoscaler, ok bool, err error) {
	for i, ct := range d.Spec.Template.Spec.Containers {
		if !isClusterAutoscaler(ct) {
			continue
		}
		c, err = ParseClusterAutoscaler(commandLine(ct))
		if err != nil {
			return c, true, fmt.Errorf("deployment %s/%s: %w", d.Namespace, d.Name, err)
		}
		c.Namespace, c.Name, c.Container = d.Namespace, d.Name, i
		c.ArgsField, c.ArgsAbsent = "args", len(ct.Args) == 0
		if len(ct.Args) == 0 && len(ct.Command) > 0 {
			c.ArgsField, c.ArgsAbsent = "command", false
		}
		return c, true, nil
	}
	return c, false, nil
}
