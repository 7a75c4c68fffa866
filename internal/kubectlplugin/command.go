package kubectlplugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

// Name is how people call the plugin.
const Name = "kubectl node-ready"

// Exit statuses of Run.
const (
	ExitOK    = 0
	ExitError = 1 // the command failed, or cleanup skip was declined
	ExitUsage = 2 // bad command line
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

var commands = []*command{
	{
		path: "status", usage: "[-o wide|json|yaml] [-l selector]", flags: []string{"output", "selector"},
		outputs: []string{OutputWide, OutputJSON, OutputYAML},
		short:   "One line per node: verified, our taint, failing checks, age, cleanup",
		long: `Shows one line per node (sorted by name):

  NAME      the node
  VERIFIED  the agent's label ` + api.VerifiedLabel + `: true, false (re-tainted), unknown (not set)
  TAINT     which of the agent's taints the node carries: unverified (` + api.StartupTaintKey + `),
            unhealthy (` + api.UnhealthyTaintKey + `), none
  FAILING   the failing checks the agent's ` + api.ConditionType + ` condition names, "-" when none
  AGE       since the node was created
  CLEANUP   none; skip (` + api.SkipCleanupAnnotation + `=true set in advance); or, for a node
            being deleted, "deleting:" and where its cleanup stands from the webhook's
            ` + api.CleanupStatusAnnotation + ` annotation ("deleting: attempt 2, 1 failed"),
            "not started", "status unreadable", "skip requested" or "finalizer gone"

-o wide adds REASON (the condition's reason), BYPASS (` + api.SkipVerificationAnnotation + `=true) and
FINALIZER (` + api.Finalizer + ` present). -o json and -o yaml print a list of kind ` + ListKind + `
(apiVersion ` + ListAPIVersion + `; fields are only ever added), with the condition and the
parsed cleanup status of each node.`,
		run: runStatus,
	},
	{
		path: "why", usage: "NODE [--events N]", nargs: 1, flags: []string{"events"},
		short: "Why a node is (un)verified: the agent's condition, its last round, recent Events",
		long: `Shows for one node:

  - its verified label, our taints, the bypass annotation and its cleanup;
  - the agent's ` + api.ConditionType + ` condition: status, reason, message, last transition and when it
    was last written;
  - the agent's last reported round, read from that condition: the agent rewrites the condition
    only when the outcome changes (another check fails, the node recovers), so this is the
    latest change, not necessarily the latest round; rounds since then had the same outcome
    as long as the agent runs;
  - the newest Events about the node (events.k8s.io/v1, regarding.kind=Node and regarding.name),
    oldest first and newest last, with each Event's series count. They are looked for in all
    namespaces (Events about nodes live in "default"), or in the one --namespace names; when
    listing all namespaces is not allowed, in "default".`,
		run: runWhy,
	},
	{
		path: "bypass", usage: "NODE", nargs: 1,
		short: "Let a node through: set " + api.SkipVerificationAnnotation + "=true",
		long: `Sets the annotation ` + api.SkipVerificationAnnotation + `=true on the node (a merge patch of that one
annotation). The agent then removes its taints at once and never re-taints the node while the
annotation is there. Undo with unbypass.`,
		run: runBypass,
	},
	{
		path: "unbypass", usage: "NODE", nargs: 1,
		short: "Verify a node again: remove " + api.SkipVerificationAnnotation,
		long: `Removes the annotation ` + api.SkipVerificationAnnotation + ` from the node (a merge patch of that one
annotation). The agent resumes its checks, and re-taints the node if they keep failing.`,
		run: runUnbypass,
	},
	{
		path: "cleanup status", usage: "[-o json|yaml] [-l selector]", flags: []string{"output", "selector"},
		outputs: []string{OutputJSON, OutputYAML},
		short:   "Nodes being deleted whose cleanup holds them, plugin by plugin",
		long: `Lists the nodes being deleted (deletionTimestamp set) that still carry the finalizer
` + api.Finalizer + `, one line per cleanup plugin, from the webhook's ` + api.CleanupStatusAnnotation + `
annotation: how long ago the node was deleted, the attempt, when the next attempt comes after a
failed one, and each plugin's state (pending, running, done, skipped, failed: reason, dry run).
An annotation that cannot be read shows as "unreadable"; a node without one as "not started".
-o json and -o yaml print the same list as status does, for these nodes.`,
		run: runCleanupStatus,
	},
	{
		path: "cleanup skip", usage: "NODE [--yes]", nargs: 1, flags: []string{"yes"},
		short: "Let a node go without cleanup: set " + api.SkipCleanupAnnotation + "=true",
		long: `Sets the annotation ` + api.SkipCleanupAnnotation + `=true on the node (a merge patch of that one
annotation, guarded by the node's UID): the webhook removes its finalizer without running the
cleanup plugins, also while a cleanup is running. Whatever the plugins would have cleaned up
(volume attachments, storage, external inventories, notifications) stays as it is. On a node
that is not being deleted, the annotation waits there for its deletion.

Without --yes it shows where the node's cleanup stands and asks "[y/N]" on stderr, reading
the answer from stdin, also when stdin is not a terminal (echo y | kubectl node-ready cleanup
skip NODE). Anything but y or yes, or no answer at all (stdin empty or closed), leaves the node
untouched and exits with status 1.`,
		run: runCleanupSkip,
	},
}

// Run runs the plugin with args (without the program name) and returns
// the exit status: 0, 1 when the command failed or was declined, 2 for a
// bad command line.
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
		fmt.Fprintf(env.Stderr, "error: "+format+"\nSee '%s'.\n", append(a, helpHint)...)
		return ExitUsage
	}
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	if opts.Version {
		fmt.Fprintln(env.Stdout, version.String("kubectl-node_ready"))
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
		return usageErr("%s: %s does not apply to %s", strings.Join(bad, ", "), plural(len(bad), "flag", "flags"), cmd.path)
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
		fmt.Fprintf(env.Stderr, "error: %v\n", err)
		return ExitError
	}
	inv := &invocation{opts: opts, args: rest, api: api, namespace: namespace, explicit: explicit,
		stdin: env.Stdin, out: env.Stdout, err: env.Stderr, now: env.Now()}
	if err := cmd.run(ctx, inv); err != nil {
		var d declined
		if errors.As(err, &d) {
			fmt.Fprintln(env.Stderr, d.Error())
		} else {
			fmt.Fprintf(env.Stderr, "error: %v\n", err)
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

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// declined is a cleanup skip the person said no to: not an error, but
// nothing happened, so the exit status is 1.
type declined string

func (d declined) Error() string { return string(d) }

func runStatus(ctx context.Context, inv *invocation) error {
	nodes, err := inv.api.ListNodes(ctx, inv.opts.Selector)
	if err != nil {
		return err
	}
	reports := Reports(nodes)
	if inv.opts.Output == OutputJSON || inv.opts.Output == OutputYAML {
		return PrintList(inv.out, reports, inv.opts.Output)
	}
	if len(reports) == 0 {
		fmt.Fprintln(inv.err, noneFound("No nodes found", inv.opts.Selector))
		return nil
	}
	return PrintStatus(inv.out, reports, inv.opts.Output == OutputWide, inv.now)
}

func noneFound(what, selector string) string {
	if selector != "" {
		return what + " matching " + selector + "."
	}
	return what + "."
}

func runCleanupStatus(ctx context.Context, inv *invocation) error {
	nodes, err := inv.api.ListNodes(ctx, inv.opts.Selector)
	if err != nil {
		return err
	}
	reports := InCleanup(Reports(nodes))
	if inv.opts.Output == OutputJSON || inv.opts.Output == OutputYAML {
		return PrintList(inv.out, reports, inv.opts.Output)
	}
	if len(reports) == 0 {
		fmt.Fprintln(inv.err, noneFound("No node is being deleted with the finalizer "+api.Finalizer, inv.opts.Selector))
		return nil
	}
	return PrintCleanup(inv.out, reports, inv.now)
}

func runWhy(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	why := Why{Report: Report(node), EventsScope: "all namespaces"}
	ns := ""
	if inv.explicit {
		ns, why.EventsScope = inv.namespace, "namespace "+inv.namespace
	}
	events, err := inv.api.ListNodeEvents(ctx, ns, name)
	if apierrors.IsForbidden(err) && ns == "" {
		why.EventsScope = "namespace " + metav1.NamespaceDefault + " (listing all namespaces is not allowed)"
		events, err = inv.api.ListNodeEvents(ctx, metav1.NamespaceDefault, name)
	}
	if err != nil {
		why.EventsErr = err.Error()
	} else {
		why.Events, why.EventsTotal = EventLines(events, inv.opts.Events)
	}
	if err := PrintWhy(inv.out, why, inv.now); err != nil {
		return err
	}
	if why.EventsErr != "" {
		fmt.Fprintf(inv.err, "warning: Events not shown: %s\n", why.EventsErr)
	}
	return nil
}

// annotationPatch is a merge patch that sets key to value (removes it when
// value is nil) on the node of uid: the UID makes it fail rather than touch
// a node re-created under the same name since it was read.
func annotationPatch(uid, key string, value *string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]*string{key: value},
	}})
}

func runBypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if node.Annotations[api.SkipVerificationAnnotation] == "true" {
		fmt.Fprintf(inv.out, "node/%s already bypassed (%s=true): nothing changed\n", name, api.SkipVerificationAnnotation)
		return nil
	}
	value := "true"
	patch, err := annotationPatch(string(node.UID), api.SkipVerificationAnnotation, &value)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(inv.out, "node/%s bypassed: %s=true; the agent removes its taints now and does not re-taint the node until `%s unbypass %s`\n",
		name, api.SkipVerificationAnnotation, Name, name)
	return nil
}

func runUnbypass(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if _, ok := node.Annotations[api.SkipVerificationAnnotation]; !ok {
		fmt.Fprintf(inv.out, "node/%s is not bypassed (no %s): nothing changed\n", name, api.SkipVerificationAnnotation)
		return nil
	}
	patch, err := annotationPatch(string(node.UID), api.SkipVerificationAnnotation, nil)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(inv.out, "node/%s unbypassed: %s removed; the agent checks the node again and re-taints it if its checks keep failing\n", name, api.SkipVerificationAnnotation)
	return nil
}

func runCleanupSkip(ctx context.Context, inv *invocation) error {
	name := inv.args[0]
	node, err := inv.api.GetNode(ctx, name)
	if err != nil {
		return err
	}
	if node.Annotations[api.SkipCleanupAnnotation] == "true" {
		fmt.Fprintf(inv.out, "node/%s already has %s=true: nothing changed\n", name, api.SkipCleanupAnnotation)
		return nil
	}
	c := CleanupOf(node)
	if !inv.opts.Yes {
		fmt.Fprintf(inv.err, "Node %s: cleanup %s.\n", name, c.Summary)
		if c.State != CleanupDeleting {
			fmt.Fprintf(inv.err, "The node is not being deleted: the annotation waits for its deletion.\n")
		}
		fmt.Fprintf(inv.err, "The webhook will remove the finalizer %s without running the cleanup plugins;\n"+
			"what they would clean up (volume attachments, storage, inventories, notifications) stays as it is.\n"+
			"Skip cleanup of node %s? [y/N] ", api.Finalizer, name)
		yes, err := readYes(inv.stdin)
		if err != nil {
			return fmt.Errorf("read the answer: %w", err)
		}
		if !yes {
			return declined(fmt.Sprintf("cleanup skip cancelled: node %s unchanged", name))
		}
	}
	value := "true"
	patch, err := annotationPatch(string(node.UID), api.SkipCleanupAnnotation, &value)
	if err != nil {
		return err
	}
	if err := inv.api.PatchNode(ctx, name, patch); err != nil {
		return err
	}
	fmt.Fprintf(inv.out, "node/%s annotated %s=true: the webhook removes the finalizer %s without cleanup\n", name, api.SkipCleanupAnnotation, api.Finalizer)
	return nil
}

// readYes reads one line and reports whether it says y or yes. No input at
// all (an empty or closed stdin) is a no.
func readYes(r io.Reader) (bool, error) {
	if r == nil {
		return false, nil
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes", nil
}
