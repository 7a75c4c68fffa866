package doctor

import (
	"fmt"
	"io"
	"strings"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// Report is what doctor found; -o json|yaml print it. Fields are
// only ever added.
type Report struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Installs are the kube-node-ready installations found, each with how
	// the autoscalers treat its taints and the findings.
	Installs []InstallReport `json:"installs"`
	// ClusterAutoscalers are the Cluster Autoscaler Deployments read.
	ClusterAutoscalers []ClusterAutoscalerView `json:"clusterAutoscalers"`
	// Karpenter says whether Karpenter's NodePool API is served, and the NodePools.
	Karpenter KarpenterView `json:"karpenter"`
	// StrandedTaints are taints of ours on nodes that no running agent
	// removes (each a problem), with the fixes.
	StrandedTaints []StrandedTaint `json:"strandedTaints"`
	// HeldFinalizers are finalizers of ours on nodes that no running
	// webhook removes (each a problem: those nodes' deletions hang).
	HeldFinalizers []HeldFinalizer `json:"heldFinalizers"`
	// UnresolvedExternalNames are the agents' external names that do not
	// resolve from the webhook's pod (each a problem).
	UnresolvedExternalNames []UnresolvedName `json:"unresolvedExternalNames,omitempty"`
	// ReadinessRules are the node readiness controller's rules that adopt a
	// taint of ours (readinessrules.go).
	ReadinessRules []RuleFinding `json:"readinessRules,omitempty"`
	// Problems counts the findings of severity problem.
	Problems int `json:"problems"`
	// ReadErrors are the reads that failed: the verdict is incomplete.
	ReadErrors []string `json:"readErrors,omitempty"`
	// Warnings are reads that fell back and values that could not be read.
	Warnings []string `json:"warnings,omitempty"`
}

// InstallReport is one installation and its diagnosis.
type InstallReport struct {
	Install
	// UnverifiedDeadline is the webhook's --unverified-deadline ("" when
	// remediation is off).
	UnverifiedDeadline string `json:"unverifiedDeadline,omitempty"`
	// HeldAfterReboot are the nodes its agents hold after a reboot, with
	// --reverify-after-reboot.
	HeldAfterReboot []string `json:"heldAfterReboot,omitempty"`
	Diagnosis
}

// ClusterAutoscalerView is a Cluster Autoscaler's flags that matter here.
type ClusterAutoscalerView struct {
	Deployment           string   `json:"deployment"`
	StartupTaints        []string `json:"startupTaints,omitempty"`
	StatusTaints         []string `json:"statusTaints,omitempty"`
	StartupTaintPrefixes []string `json:"startupTaintPrefixes,omitempty"`
	MaxNodeProvisionTime string   `json:"maxNodeProvisionTime"`
	MaxNodeStartupTime   string   `json:"maxNodeStartupTime"`
}

// KarpenterView is whether Karpenter is installed, its controllers and
// its NodePools.
type KarpenterView struct {
	Installed bool `json:"installed"`
	// Controllers are the Deployments running Karpenter, with the release
	// each runs; none when no Deployment shows one (a managed Karpenter).
	Controllers []Karpenter `json:"controllers,omitempty"`
	NodePools   []string    `json:"nodePools,omitempty"`
	// ReadError says why the NodePools could not be read.
	ReadError string `json:"readError,omitempty"`
}

func caView(c ClusterAutoscaler) ClusterAutoscalerView {
	return ClusterAutoscalerView{Deployment: c.Namespace + "/" + c.Name, StartupTaints: c.StartupTaints, StatusTaints: c.StatusTaints,
		StartupTaintPrefixes: c.StartupTaintPrefixes, MaxNodeProvisionTime: ShortDuration(c.MaxNodeProvisionTime), MaxNodeStartupTime: ShortDuration(c.MaxNodeStartupTime)}
}

func installView(in Install, d Diagnosis) InstallReport {
	r := InstallReport{Install: in, Diagnosis: d}
	if in.Remediation != "" && in.Remediation != "off" {
		r.UnverifiedDeadline = ShortDuration(in.UnverifiedDeadline)
	}
	if r.Treatments == nil {
		r.Treatments = []Treatment{}
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	return r
}

// Print writes the report for a person: what was read, one line per
// taint and autoscaler, then the findings with their fixes.
func Print(w io.Writer, rep Report) error {
	tw := text.NewTable(w)
	for _, c := range rep.ClusterAutoscalers {
		text.Printf(tw, "Cluster Autoscaler:\tDeployment %s (--max-node-provision-time=%s, --max-node-startup-time=%s)\n", c.Deployment, c.MaxNodeProvisionTime, c.MaxNodeStartupTime)
	}
	if len(rep.ClusterAutoscalers) == 0 {
		text.Printf(tw, "Cluster Autoscaler:\tno Deployment visible (a managed one, as on GKE or AKS, runs outside the cluster)\n")
	}
	switch {
	case rep.Karpenter.ReadError != "":
		text.Printf(tw, "Karpenter:\tinstalled; NodePools not read (see below)\n")
	case !rep.Karpenter.Installed:
		text.Printf(tw, "Karpenter:\tnot installed (no karpenter.sh/v1 NodePools)\n")
	case len(rep.Karpenter.NodePools) == 0:
		text.Printf(tw, "Karpenter:\tinstalled, no NodePools\n")
	default:
		text.Printf(tw, "Karpenter:\tNodePools %s\n", strings.Join(rep.Karpenter.NodePools, ", "))
	}
	if rep.Karpenter.Installed {
		for _, k := range rep.Karpenter.Controllers {
			from := "from " + k.VersionFrom
			if k.Version == "" {
				from = "no image tag or label names its release"
			}
			text.Printf(tw, "\t%s: %s (%s)\n", k.Deployment, k.Named(), from)
		}
		if len(rep.Karpenter.Controllers) == 0 {
			text.Printf(tw, "\tno Deployment visible: its version is unknown (a managed one, as EKS Auto Mode's, runs outside the cluster)\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	n := 0
	for _, in := range rep.Installs {
		if err := printInstall(w, in, &n); err != nil {
			return err
		}
	}
	printRules(w, rep.ReadinessRules, &n)
	printStranded(w, rep.StrandedTaints, &n)
	printHeld(w, rep.HeldFinalizers, &n)
	printUnresolved(w, rep.UnresolvedExternalNames, &n)
	if len(rep.ReadErrors) > 0 {
		text.Printf(w, "\nNot read (the verdict is incomplete):\n")
		for _, e := range rep.ReadErrors {
			text.Printf(w, "  - %s\n", e)
		}
	}
	advice := n - rep.Problems
	switch {
	case rep.Problems > 0:
		text.Printf(w, "\n%d %s, %d advice.\n", rep.Problems, text.Plural(rep.Problems, "problem", "problems"), advice)
	case advice > 0:
		text.Printf(w, "\nNo problems; %d advice.\n", advice)
	default:
		text.Printf(w, "\nNo problems: every autoscaler present treats our taints as it should.\n")
	}
	return nil
}

// printInstall writes one installation: its keys, how each autoscaler
// treats them, and its findings numbered on from *n.
func printInstall(w io.Writer, in InstallReport, n *int) error {
	text.Printf(w, "\n")
	tw := text.NewTable(w)
	agent := in.Agent
	if in.Release != "" {
		agent += " (Helm release " + in.Release + ")"
	}
	text.Printf(tw, "kube-node-ready:\t%s\n", agent)
	text.Printf(tw, "  startup taint:\t%s\n", in.Startup)
	text.Printf(tw, "  unhealthy taint:\t%s\n", in.Unhealthy)
	switch {
	case in.Webhook == "":
		text.Printf(tw, "  webhook:\tnot found\n")
	case in.UnverifiedDeadline == "":
		text.Printf(tw, "  webhook:\t%s, remediation off\n", in.Webhook)
	default:
		text.Printf(tw, "  webhook:\t%s, remediation %s after --unverified-deadline=%s\n", in.Webhook, in.Remediation, in.UnverifiedDeadline)
	}
	printInstallModes(tw, in)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(in.Treatments) > 0 {
		text.Printf(w, "\n")
		tw = text.NewTable(w)
		fmt.Fprintln(tw, "TAINT\tROLE\tAUTOSCALER\tTREATS IT AS\tBECAUSE")
		for _, t := range in.Treatments {
			text.Printf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Key, t.Role, t.Autoscaler, t.Class, t.Rule)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(in.Findings) == 0 {
		return nil
	}
	text.Printf(w, "\nFindings:\n")
	for _, f := range in.Findings {
		*n++
		text.Printf(w, "%d. %s: %s, %s taint %s: %s\n", *n, f.Severity, f.Autoscaler, f.Role, f.Key, f.Summary)
		for _, line := range wrap(f.Detail, 96) {
			text.Printf(w, "   %s\n", line)
		}
		for i, fix := range f.Fixes {
			label := "fix:"
			if i > 0 {
				label = "or: "
			}
			text.Printf(w, "   %s %s\n", label, fix)
		}
	}
	return nil
}

// printStranded writes the taints no running agent removes, numbered on
// from *n.
func printStranded(w io.Writer, stranded []StrandedTaint, n *int) {
	printFindings(w, "Taints no running agent removes", stranded, n, func(s StrandedTaint) (string, string, []string) {
		return fmt.Sprintf("problem: %s taint %s on %d %s (%s): stranded", s.Role, s.Key, len(s.Nodes), text.Plural(len(s.Nodes), "node", "nodes"), strings.Join(s.Nodes, ", ")),
			s.Detail, s.Fixes
	})
}

// printFindings writes title, then each of items numbered on from *n: the
// line show gives it, then its detail and its fixes, the alternatives
// after the first labelled "or: ". Nothing without items.
func printFindings[T any](w io.Writer, title string, items []T, n *int, show func(T) (line, detail string, fixes []string)) {
	if len(items) == 0 {
		return
	}
	text.Printf(w, "\n%s:\n", title)
	for _, it := range items {
		*n++
		line, detail, fixes := show(it)
		text.Printf(w, "%d. %s\n", *n, line)
		printDetailAndFixes(w, detail, fixes, "or: ")
	}
}

// printDetailAndFixes writes a finding's detail, wrapped, then its fixes:
// the first labelled "fix:", the others next (alternatives "or: ", steps
// "and:").
func printDetailAndFixes(w io.Writer, detail string, fixes []string, next string) {
	for _, line := range wrap(detail, 96) {
		text.Printf(w, "   %s\n", line)
	}
	for i, fix := range fixes {
		label := "fix:"
		if i > 0 {
			label = next
		}
		text.Printf(w, "   %s %s\n", label, fix)
	}
}

// printHeld writes the finalizers no running webhook removes, numbered on
// from *n.
func printHeld(w io.Writer, held []HeldFinalizer, n *int) {
	if len(held) == 0 {
		return
	}
	text.Printf(w, "\nFinalizers no running webhook removes:\n")
	for _, h := range held {
		*n++
		stuck := ""
		if len(h.Deleting) > 0 {
			stuck = fmt.Sprintf("; %d being deleted, stuck: %s", len(h.Deleting), strings.Join(h.Deleting, ", "))
		}
		text.Printf(w, "%d. problem: finalizer %s on %d %s (%s)%s\n", *n, h.Finalizer, len(h.Nodes), text.Plural(len(h.Nodes), "node", "nodes"), strings.Join(h.Nodes, ", "), stuck)
		printDetailAndFixes(w, h.Detail, h.Fixes, "and:")
	}
}

// wrap breaks s into lines of at most width characters at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
