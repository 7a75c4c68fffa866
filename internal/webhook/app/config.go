package app

import (
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/remediate"
)

// Config is what Options.Resolve made of validated options: the options
// themselves and, parsed once, the configurations of the parts built from
// several of them. Run reads it.
type Config struct {
	Options
	// Remediation is remediation's configuration but for what needs the API
	// server (node count, Event recorder, suspend switch) and the clock; nil
	// with --remediation=off.
	Remediation *remediate.Config
	// ReplaceOnlyReports: --remediation=replace in observe mode, which
	// reports instead.
	ReplaceOnlyReports bool
	// StartupTaint is admission's startup taint decision; nil without
	// --inject-startup-taint.
	StartupTaint *startuptaint.Config
}
