package kubectlplugin

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-node-ready/kube-node-ready/internal/version"
)

// Connection is how the plugin reaches the API server: kubectl's own flags
// (--kubeconfig, --context, --namespace, --token, ...) read with client-go's
// kubeconfig loading rules, so KUBECONFIG and ~/.kube/config work as they
// do for kubectl.
type Connection struct {
	// Kubeconfig is --kubeconfig; empty means KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	// Overrides are the other connection flags.
	Overrides clientcmd.ConfigOverrides
}

// AddFlags registers kubectl's connection flags, with kubectl's names.
func (c *Connection) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file to use (default: $KUBECONFIG, then ~/.kube/config)")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	names.ClusterOverrideFlags.APIServer.ShortName = "s"
	clientcmd.BindOverrideFlags(&c.Overrides, fs, names)
	// Nodes have no namespace; only why's Event lookup and doctor's search
	// for our workloads use one.
	fs.Lookup(clientcmd.FlagNamespace).Usage = "Namespace to look for the node's Events in (why) or for kube-node-ready's DaemonSet and webhook (doctor); default: all namespaces"
}

// Connect builds the API client. It also returns the namespace that
// --namespace or the kubeconfig context names, and whether --namespace set it.
func (c *Connection) Connect() (api API, namespace string, explicit bool, err error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &c.Overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, "", false, errors.New("no kubeconfig found: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config")
		}
		return nil, "", false, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-node_ready/" + version.Version
	if namespace, _, err = cc.Namespace(); err != nil {
		return nil, "", false, fmt.Errorf("kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", false, fmt.Errorf("kubernetes client: %w", err)
	}
	return NewAPI(client), namespace, c.Overrides.Context.Namespace != "", nil
}
