package webhook

import (
	"flag"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
)

// addModeFlag registers --mode, the chart's mode: the same value the agents
// run with.
func (o *Options) addModeFlag(fs *flag.FlagSet) {
	fs.StringVar(&o.Mode, "mode", o.Mode, "enforce, or observe: admission adds no startup taint (a node enforce would have tainted is marked infra.894.io/startup-taint=observed, and its agent records how long enforce would have held it) and --remediation=replace only reports; finalizers and cleanup are the same in both modes")
}

func (o *Options) validateMode(p *cli.Problems) {
	if o.Mode != api.ModeEnforce && o.Mode != api.ModeObserve {
		p.Add("mode", "%q is not a mode: %s or %s", o.Mode, api.ModeEnforce, api.ModeObserve)
	}
}

// observe reports whether the webhook runs in observe mode.
func (o *Options) observe() bool { return o.Mode == api.ModeObserve }
