package kubectlplugin

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/text"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

// Name is how people call the plugin.
const Name = "kubectl node-ready"

// Exit statuses of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed, cleanup skip was declined, or doctor found a problem
	ExitUsage = 2 // bad command line
	// ExitIncomplete: doctor could not read what it needs (RBAC, no agent
	// found) and found no problem in what it could read.
	ExitIncomplete = 3
)

// Env is what Run takes from the process.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Connect builds the API client from the connection flags; nil means
	// Connection.Connect. Tests put a fake here.
	Connect func(*Connection) (api API, namespace string, explicit bool, err error)
	// Now is the clock for ages; nil means time.Now.
	Now func() time.Time
}

// Options are the command line's values.
type Options struct {
	// Output is -o: "" (table), wide, json or yaml.
	Output string
	// Selector is -l, a label selector of the nodes to show.
	Selector string
	// Yes answers cleanup skip's question with yes.
	Yes bool
	// Events is how many of the newest Events why shows; 0 shows all.
	Events int
	// Reason is suspend's --reason.
	Reason string
	// Help asks for the help of the command given (or of the plugin).
	Help bool
	// Version asks for the build identity.
	Version bool
	// Connection holds kubectl's connection flags.
	Connection Connection
}

// commandFlags are the flags some commands take; each command names the
// ones it accepts.
func (o *Options) commandFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Output, "output", "o", "", "Output format: wide (status only: more columns), json or yaml")
	fs.StringVarP(&o.Selector, "selector", "l", "", "Label selector of the nodes to show (e.g. -l karpenter.sh/nodepool=general)")
	fs.BoolVarP(&o.Yes, "yes", "y", false, "Skip cleanup without asking")
	fs.IntVar(&o.Events, "events", 20, "Show at most this many of the newest Events about the node (0: all)")
	fs.StringVar(&o.Reason, "reason", "", "Why (suspend): shown by status, doctor, the logs and the alert")
}

// globalFlags registers --help, --version and the connection flags.
func (o *Options) globalFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.Help, "help", "h", false, "Show help for the plugin or the command")
	fs.BoolVar(&o.Version, "version", false, "Print the plugin's version and exit")
	o.Connection.AddFlags(fs)
}

// invocation is one run of a command.
type invocation struct {
	opts      *Options
	args      []string
	api       API
	namespace string
	explicit  bool
	stdin     io.Reader
	out, err  io.Writer
	now       time.Time
}

// command is one of the plugin's commands.
type command struct {
	path  string // "status", "cleanup skip"
	usage string // the arguments after the path
	nargs int
	short string
	long  string
	flags []string
	// outputs are the -o values it takes besides the table.
	outputs []string
	run     func(context.Context, *invocation) error
}

// commands are the plugin's commands, in the order the help lists them;
// each is declared in its own file (cmd_*.go) beside its run function.
var commands = []*command{statusCommand, whyCommand, bypassCommand, unbypassCommand, cleanupStatusCommand, cleanupSkipCommand, suspendCommand, resumeCommand, doctorCommand}

// Run runs the plugin with args (without the program name) and returns
// the exit status: 0, 1 when the command failed or was declined (doctor:
// found a problem), 2 for a bad command line, 3 when doctor could not read
// what it needs.
func Run(ctx context.Context, args []string, env Env) int {
	if env.Connect == nil {
		env.Connect = (*Connection).Connect
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	opts := &Options{}
	fs := pflag.NewFlagSet(Name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	opts.globalFlags(fs)
	global := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { global[f.Name] = true })
	opts.commandFlags(fs)
	helpHint := Name + " --help"
	usageErr := func(format string, a ...any) int {
		text.Printf(env.Stderr, "error: "+format+"\nSee '%s'.\n", append(a, helpHint)...)
		return ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	if opts.Version {
		text.Printf(env.Stdout, "%s\n", version.String("kubectl-node_ready"))
		return ExitOK
	}
	pos := fs.Args()
	if len(pos) > 0 && pos[0] == "help" {
		opts.Help, pos = true, pos[1:]
	}
	if len(pos) == 0 {
		printHelp(env.Stdout, fs, global)
		return ExitOK
	}
	cmd, rest := findCommand(pos)
	if cmd == nil {
		if pos[0] == "cleanup" {
			if opts.Help {
				printGroupHelp(env.Stdout, "cleanup")
				return ExitOK
			}
			if len(pos) == 1 {
				return usageErr("cleanup needs a command: status or skip")
			}
			return usageErr("unknown command %q for cleanup: want status or skip", pos[1])
		}
		return usageErr("unknown command %q", pos[0])
	}
	if opts.Help {
		printCommandHelp(env.Stdout, cmd, fs)
		return ExitOK
	}
	helpHint = Name + " " + cmd.path + " --help"
	var bad []string
	fs.Visit(func(f *pflag.Flag) {
		if !global[f.Name] && !slices.Contains(cmd.flags, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return usageErr("%s: %s does not apply to %s", strings.Join(bad, ", "), text.Plural(len(bad), "flag", "flags"), cmd.path)
	}
	if len(rest) != cmd.nargs {
		if cmd.nargs == 0 {
			return usageErr("%s takes no arguments, got %q", cmd.path, rest)
		}
		return usageErr("%s needs one NODE, got %d arguments", cmd.path, len(rest))
	}
	if opts.Output != OutputTable && !slices.Contains(cmd.outputs, opts.Output) {
		return usageErr("--output %q: %s takes %s", opts.Output, cmd.path, strings.Join(cmd.outputs, ", "))
	}
	if opts.Events < 0 {
		return usageErr("--events %d: want 0 (all) or more", opts.Events)
	}
	api, namespace, explicit, err := env.Connect(&opts.Connection)
	if err != nil {
		text.Printf(env.Stderr, "error: %v\n", err)
		return ExitError
	}
	inv := &invocation{opts: opts, args: rest, api: api, namespace: namespace, explicit: explicit,
		stdin: env.Stdin, out: env.Stdout, err: env.Stderr, now: env.Now()}
	if err := cmd.run(ctx, inv); err != nil {
		var d declined
		var st exitStatus
		if errors.As(err, &st) {
			text.Printf(env.Stderr, "%s\n", st.msg)
			return st.code
		}
		if errors.As(err, &d) {
			text.Printf(env.Stderr, "%s\n", d.Error())
		} else {
			text.Printf(env.Stderr, "error: %v\n", err)
		}
		return ExitError
	}
	return ExitOK
}

// findCommand matches the positional arguments to a command path and
// returns the command and the arguments after the path.
func findCommand(pos []string) (*command, []string) {
	for _, c := range commands {
		path := strings.Fields(c.path)
		if len(pos) >= len(path) && slices.Equal(pos[:len(path)], path) {
			return c, pos[len(path):]
		}
	}
	return nil, nil
}

// declined is a cleanup skip the person said no to: not an error, but
// nothing happened, so the exit status is 1.
type declined string

func (d declined) Error() string { return string(d) }
