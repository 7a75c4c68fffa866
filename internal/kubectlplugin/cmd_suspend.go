package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

// suspendCommand is `kubectl node-ready suspend`.
var suspendCommand = &command{
	path: "suspend", nargs: 0, flags: []string{"reason"},
	short: "Stop re-taints, replacements and startup taints everywhere, now",
	long: `Turns on the live suspend switch of every kube-node-ready release found (the ConfigMap ` + api.SuspendConfigMap + `
in the release's namespace, or the name its agents' and webhook's --suspend-configmap give): within
seconds no agent re-taints its node, remediation replaces nothing and admission adds no startup
taint to new nodes. Untaints, verification of new nodes and cleanup of deleted nodes go on. It
lasts until ` + "`resume`" + `, across restarts and upgrades (the chart never renders or prunes it); the
agents and the webhook may only read it. --reason says why, for the others who see it in status,
doctor, the logs and the KubeNodeReadySuspended alert.`,
	run: runSuspend,
}

// resumeCommand is `kubectl node-ready resume`.
var resumeCommand = &command{
	path: "resume", nargs: 0,
	short: "Turn the suspend switch off: re-taints, replacements and startup taints resume",
	long: `Deletes the suspend switch of every kube-node-ready release found. Agents whose checks keep
failing re-taint again (within the fleet budget), and remediation gives every unverified node a
full deadline from now before it replaces any.`,
	run: runResume,
}

// switchRef is one release's suspend switch.
type switchRef struct{ namespace, name string }

func (s switchRef) String() string { return "configmap/" + s.name + " in " + s.namespace }

// switchRefs are the switches of the releases found where doctor looks
// (--namespace, else every namespace, else the context's): one per
// namespace and name the agents and webhooks read. With none found it is
// the default name in --namespace or the context's namespace, and a note
// says so.
func switchRefs(ctx context.Context, inv *invocation) (refs []switchRef, notes []string) {
	ns := ""
	if inv.explicit {
		ns = inv.namespace
	}
	add := func(namespace, name string) {
		if r := (switchRef{namespace, name}); !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	dss, err1 := inv.api.ListDaemonSets(ctx, ns)
	for _, ds := range dss {
		if doctor.IsOurs(ds.Spec.Template, doctor.AgentApp) && len(ds.Spec.Template.Spec.Containers) > 0 {
			name, _, _ := doctor.Setting(doctor.AgentContainer(ds.Spec.Template), api.AgentEnvPrefix, api.SuspendConfigMap, api.SuspendConfigMapFlag)
			add(ds.Namespace, name)
		}
	}
	deps, err2 := inv.api.ListDeployments(ctx, ns)
	for _, d := range deps {
		if doctor.IsOurs(d.Spec.Template, doctor.WebhookApp) && len(d.Spec.Template.Spec.Containers) > 0 {
			name, _, _ := doctor.Setting(d.Spec.Template.Spec.Containers[0], api.WebhookEnvPrefix, api.SuspendConfigMap, api.SuspendConfigMapFlag)
			add(d.Namespace, name)
		}
	}
	if err := errors.Join(err1, err2); err != nil {
		notes = append(notes, fmt.Sprintf("warning: %v", err))
	}
	if len(refs) == 0 {
		add(inv.namespace, api.SuspendConfigMap)
		notes = append(notes, fmt.Sprintf("note: no kube-node-ready agent DaemonSet or webhook Deployment found: using %s (pass --namespace for your release's)", refs[0]))
	}
	return refs, notes
}

func switchAPI(inv *invocation) (SwitchAPI, error) {
	s, ok := inv.api.(SwitchAPI)
	if !ok {
		return nil, errors.New("this connection cannot read or write ConfigMaps")
	}
	return s, nil
}

func runSuspend(ctx context.Context, inv *invocation) error {
	if inv.opts.Reason == "" {
		return errors.New(`--reason is required: say why, for the others who will see it (kubectl node-ready suspend --reason "DNS incident INC-123")`)
	}
	s, err := switchAPI(inv)
	if err != nil {
		return err
	}
	refs, notes := switchRefs(ctx, inv)
	printNotes(inv, notes)
	by := s.User(ctx)
	var errs []error
	for _, r := range refs {
		created, err := s.ApplyConfigMap(ctx, suspend.ConfigMap(r.namespace, r.name, inv.opts.Reason, by, inv.now))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		verb := "suspended"
		if !created {
			verb = "still suspended, reason updated"
		}
		text.Printf(inv.out, "%s: %s (%s): no re-taint, no replacement, no startup taint added until `kubectl node-ready resume`; untaints and cleanup go on\n", r, verb, inv.opts.Reason)
	}
	return errors.Join(errs...)
}

func runResume(ctx context.Context, inv *invocation) error {
	s, err := switchAPI(inv)
	if err != nil {
		return err
	}
	refs, notes := switchRefs(ctx, inv)
	printNotes(inv, notes)
	var errs []error
	for _, r := range refs {
		gone, err := s.DeleteConfigMap(ctx, r.namespace, r.name)
		switch {
		case err != nil:
			errs = append(errs, err)
		case gone:
			text.Printf(inv.out, "%s: resumed: re-taints, replacements and startup taints go on\n", r)
		default:
			text.Printf(inv.out, "%s: was not suspended: nothing changed\n", r)
		}
	}
	return errors.Join(errs...)
}

// switchLines say, for status and doctor, each release's switch that is
// on, with its reason and age; nothing when all are off. A switch that
// cannot be read through this connection is a warning, apart: status
// prints warnings on stderr, so its table on stdout stays a table.
func switchLines(ctx context.Context, inv *invocation) (out, warnings []string) {
	s, ok := inv.api.(SwitchAPI)
	if !ok {
		return nil, nil
	}
	refs, _ := switchRefs(ctx, inv)
	for _, r := range refs {
		cm, err := s.GetConfigMap(ctx, r.namespace, r.name)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("suspend switch %s: cannot be read: %v", r, err))
			continue
		}
		if cm == nil {
			continue
		}
		st := suspend.Of(cm)
		age := "age unknown"
		if t, err := time.Parse(time.RFC3339, st.Since); err == nil {
			age = "for " + inv.now.Sub(t).Round(time.Second).String()
		}
		by := ""
		if st.By != "" {
			by = " by " + st.By
		}
		out = append(out, fmt.Sprintf("SUSPENDED (%s%s, %s): %s: no re-taint, no replacement, no startup taint added; `kubectl node-ready resume` ends it",
			age, by, r, st.Reason))
	}
	return out, warnings
}
