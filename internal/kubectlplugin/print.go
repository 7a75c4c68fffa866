package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
)

// Output formats of -o.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// age is how long ago t was, as kubectl prints ages ("5m", "3d4h").
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// list joins names, or "-" when there are none.
func list(names []string) string {
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, ",")
}

// orNone joins names, or "none" when there are none (as the agent's
// condition says it).
func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// PrintStatus writes one line per node: NAME VERIFIED TAINT FAILING AGE
// CLEANUP, and with wide also the condition's REASON, BYPASS and FINALIZER.
func PrintStatus(w io.Writer, reports []NodeReport, wide bool, now time.Time) error {
	tw := text.NewTable(w)
	header := "NAME\tVERIFIED\tTAINT\tFAILING\tAGE\tCLEANUP"
	if wide {
		header += "\tREASON\tBYPASS\tFINALIZER"
	}
	fmt.Fprintln(tw, header)
	for _, r := range reports {
		taint := "none"
		if len(r.Taints) > 0 {
			taint = strings.Join(r.Taints, ",")
		}
		if r.Condition != nil && r.Condition.Reason == api.ReasonRebooted {
			taint += " (after reboot)"
		}
		if w := r.Would; w != nil {
			// Observe mode: what enforce would have on the node.
			taint += text.Sprintf(" (would: %s, %s)", w.Taint, age(w.Since.Time, now))
		}
		line := text.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", r.Name, r.Verified, taint, list(r.Failing), age(r.CreationTimestamp.Time, now), r.Cleanup.Summary)
		if wide {
			reason := "-"
			if r.Condition != nil {
				reason = r.Condition.Reason
			}
			line += text.Sprintf("\t%s\t%t\t%t", reason, r.Bypass, r.Finalizer)
		}
		fmt.Fprintln(tw, line) // its values escaped by sprintf
	}
	return tw.Flush()
}

// PrintCleanup writes the nodes whose cleanup is pending, one line per
// plugin: NAME DELETING ATTEMPT RETRY-IN PLUGIN STATE.
func PrintCleanup(w io.Writer, reports []NodeReport, now time.Time) error {
	tw := text.NewTable(w)
	fmt.Fprintln(tw, "NAME\tDELETING\tATTEMPT\tRETRY-IN\tPLUGIN\tSTATE")
	for _, r := range reports {
		c := r.Cleanup
		deleting := "-"
		if c.DeletionTimestamp != nil {
			deleting = age(c.DeletionTimestamp.Time, now)
		}
		row := func(attempt, retry, plugin, state string) {
			text.Printf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, deleting, attempt, retry, plugin, state)
		}
		switch {
		case c.StatusError != "":
			row("-", "-", "-", "unreadable: "+api.CleanupStatusAnnotation+": "+c.StatusError)
		case c.Status == nil:
			row("-", "-", "-", "not started: no "+api.CleanupStatusAnnotation+" yet (is the webhook running?)")
		default:
			retry := c.Status.RetryIn
			if retry == "" {
				retry = "-"
			}
			for _, p := range c.Status.PluginNames() {
				row(fmt.Sprint(c.Status.Attempt), retry, p, c.Status.Plugins[p])
			}
			if len(c.Status.Plugins) == 0 {
				row(fmt.Sprint(c.Status.Attempt), retry, "-", "no plugins enabled")
			}
		}
		if c.SkipRequested {
			row("-", "-", "-", "skip requested: "+api.SkipCleanupAnnotation+"=true, the webhook removes the finalizer without cleanup")
		}
	}
	return tw.Flush()
}

// PrintList writes reports as a List in JSON or YAML.
func PrintList(w io.Writer, reports []NodeReport, format string) error {
	if reports == nil {
		reports = []NodeReport{}
	}
	return printObject(w, List{APIVersion: ListAPIVersion, Kind: ListKind, Items: reports}, format)
}

// printObject writes v as indented JSON or, with format yaml, as YAML.
func printObject(w io.Writer, v any, format string) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == OutputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// Why is everything `why` shows about one node.
type Why struct {
	// Report is the node as status reads it.
	Report NodeReport
	// Keys are the agent's taint keys Report was read with.
	Keys TaintKeys
	// Events are the newest Events about the node, oldest first.
	Events []text.EventLine
	// EventsTotal is how many Events there were before the limit.
	EventsTotal int
	// EventsScope says where the Events were looked for.
	EventsScope string
	// EventsErr says why no Events could be read; empty when they could.
	EventsErr string
}

// stamp is a time and how long ago it was.
func stamp(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), age(t, now))
}

// PrintWhy writes the node's verification state, the agent's condition,
// what it says about the agent's last reported round, and recent Events.
func PrintWhy(w io.Writer, why Why, now time.Time) error {
	r := why.Report
	tw := text.NewTable(w)
	taint, keys := "none", why.Keys.none()
	if len(r.Taints) > 0 {
		taint, keys = strings.Join(r.Taints, ","), strings.Join(r.TaintKeys, ", ")
	}
	text.Printf(tw, "Node:\t%s\n", r.Name)
	text.Printf(tw, "Verified:\t%s\t(label %s)\n", r.Verified, api.VerifiedLabel)
	text.Printf(tw, "Taint:\t%s\t(%s)\n", taint, keys)
	text.Printf(tw, "Bypass:\t%t\t(annotation %s)\n", r.Bypass, api.SkipVerificationAnnotation)
	text.Printf(tw, "Cleanup:\t%s\n", r.Cleanup.Summary)
	if err := tw.Flush(); err != nil {
		return err
	}

	text.Printf(w, "\nCondition %s:\n", api.ConditionType)
	if c := r.Condition; c == nil {
		text.Printf(w, "  not set: no kube-node-ready agent has reported on this node\n")
	} else {
		tw = text.NewTable(w)
		text.Printf(tw, "  Status:\t%s\n", c.Status)
		text.Printf(tw, "  Reason:\t%s\n", c.Reason)
		text.Printf(tw, "  Message:\t%s\n", c.Message)
		text.Printf(tw, "  Last transition:\t%s\n", stamp(c.LastTransitionTime.Time, now))
		text.Printf(tw, "  Last written:\t%s\n", stamp(c.LastHeartbeatTime.Time, now))
		if err := tw.Flush(); err != nil {
			return err
		}
		printRound(w, c, now)
	}

	text.Printf(w, "\nEvents (events.k8s.io/v1 about Node %s, %s, newest last", r.Name, why.EventsScope)
	switch {
	case why.EventsErr != "":
		text.Printf(w, "):\n  cannot list them: %s\n", why.EventsErr)
		return nil
	case why.EventsTotal == 0:
		text.Printf(w, "):\n  none\n")
		return nil
	case len(why.Events) < why.EventsTotal:
		text.Printf(w, "; the last %d of %d):\n", len(why.Events), why.EventsTotal)
	default:
		text.Printf(w, "):\n")
	}
	tw = text.NewTable(w)
	fmt.Fprintln(tw, "  LAST SEEN\tTYPE\tREASON\tFROM\tCOUNT\tNOTE")
	for _, e := range why.Events {
		text.Printf(tw, "  %s\t%s\t%s\t%s\t%d\t%s\n", age(e.LastSeen, now), e.Type, e.Reason, e.From, e.Count, e.Note)
	}
	return tw.Flush()
}

// printRound says what the condition tells about the agent's last round,
// and what it cannot tell.
func printRound(w io.Writer, c *Condition, now time.Time) {
	round := RoundOf(c.Reason, c.Message)
	text.Printf(w, "\nAgent's last reported round (read from the condition above: the agent rewrites it only when\n"+
		"the outcome changes, so this is the latest change, not necessarily the latest round):\n")
	tw := text.NewTable(w)
	outcome := round.Outcome
	switch round.Outcome {
	case "passed":
		outcome = "passed: every check passed"
	case "failed":
		outcome = "failed: " + list(round.Message.Failing)
		if !round.Message.Since.IsZero() {
			outcome += ", failing since " + stamp(round.Message.Since, now)
		}
	case "recovering":
		outcome = "passing again after a re-taint"
		if m := round.Message; m.Needed > 0 {
			outcome += fmt.Sprintf(": %d of %d passed rounds needed to untaint", m.Passed, m.Needed)
		}
	case "bootstrapped":
		outcome = "verified; bootstrap-only agent, no rounds run on this node any more"
	case "would hold":
		outcome = "observe mode: enforce would hold this new node with the startup taint, failing: " + list(round.Message.Failing)
		if !round.Message.Since.IsZero() {
			outcome += ", held since its creation " + stamp(round.Message.Since, now)
		}
	case "rebooted":
		outcome = "held after a reboot: the boot ID changed since the node was verified"
		if b := round.Message.Boot; b != "" {
			outcome += " (verified under boot " + b + ")"
		}
		outcome += "; the startup taint stays until every check and gate passes again, failing: " + list(round.Message.Failing)
		if !round.Message.Since.IsZero() {
			outcome += ", failing since " + stamp(round.Message.Since, now)
		}
	case "would hold after reboot":
		outcome = "observe mode: the node rebooted since it was verified"
		if b := round.Message.Boot; b != "" {
			outcome += " (under boot " + b + ")"
		}
		outcome += "; enforce would hold it with the startup taint until every check and gate passes again, failing: " + list(round.Message.Failing)
		if !round.Message.Since.IsZero() {
			outcome += ", held since " + stamp(round.Message.Since, now)
		}
	case "verifying":
		outcome = "publish mode: not verified yet (a NodeReadinessRule naming the condition keeps its taint), failing: " + list(round.Message.Failing)
		if !round.Message.Since.IsZero() {
			outcome += ", failing since " + stamp(round.Message.Since, now)
		}
	case "would re-taint":
		outcome = "observe mode: enforce would have re-tainted this node"
		if !round.Message.Since.IsZero() {
			outcome += " " + stamp(round.Message.Since, now)
		}
		if m := round.Message; len(m.Failing) > 0 {
			outcome += ", failing: " + list(m.Failing)
		} else if m.Needed > 0 {
			outcome += fmt.Sprintf("; passing again: %d of %d passed rounds needed to untaint", m.Passed, m.Needed)
		}
	case "bypassed":
		outcome = "no checks: bypassed"
		if a := round.Message.Annotation; a != "" {
			outcome += " (annotation " + a + ")"
		}
	default:
		outcome += ": " + round.Detail
	}
	text.Printf(tw, "  Outcome:\t%s\n", outcome)
	if round.Message.HasModes {
		text.Printf(tw, "  Continuous checks:\t%s\n", orNone(round.Message.Continuous))
		text.Printf(tw, "  Bootstrap checks:\t%s\n", orNone(round.Message.Bootstrap))
	}
	_ = tw.Flush()
}
