package app

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/cli"
	"github.com/kube-node-ready/kube-node-ready/internal/startuptaint"
	"github.com/kube-node-ready/kube-node-ready/internal/suspend"
)

func (o *Options) addStartupTaintFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.InjectStartupTaint, api.InjectStartupTaintFlag, o.InjectStartupTaint, "admission adds the agent's startup taint to every new Node the agent DaemonSet will run on (--agent-placement), never on update, never to a node already carrying a startup key of ours; a node Karpenter launched gets its NodePool's declared key of ours or a readiness.k8s.io/ key, never the Cluster Autoscaler key; each node is marked with the decision (annotation infra.894.io/startup-taint), and the leader names the nodes that joined without one (Event StartupTaintMissed, metric)")
	fs.StringVar(&o.AgentPlacement, "agent-placement", o.AgentPlacement, "the agent DaemonSet's pod placement, JSON {\"nodeSelector\":{},\"affinity\":{},\"tolerations\":[]} as in a PodSpec: with --inject-startup-taint only nodes it selects are tainted; the chart renders it from the values that render the DaemonSet")
	fs.BoolVar(&o.KarpenterReadinessKeys, api.KarpenterReadinessKeysFlag, o.KarpenterReadinessKeys, "the cluster's Karpenter (v1.13 and later) ignores readiness.k8s.io/ taints until a node is initialized: with --inject-startup-taint, a node of a NodePool that declares none of our keys gets readiness.k8s.io/node-ready; false (older Karpenter): it gets none")
}

// placement is --agent-placement as a PodSpec.
func (o *Options) placement() (corev1.PodSpec, error) {
	var spec corev1.PodSpec
	dec := json.NewDecoder(strings.NewReader(o.AgentPlacement))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return corev1.PodSpec{}, fmt.Errorf("want JSON with nodeSelector, affinity and tolerations: %w", err)
	}
	return corev1.PodSpec{NodeSelector: spec.NodeSelector, Affinity: spec.Affinity, Tolerations: spec.Tolerations}, nil
}

// resolveStartupTaint checks the startup taint flags and returns the
// decision's configuration; nil when injection is off or a flag is invalid.
func (o *Options) resolveStartupTaint(p *cli.Problems) *startuptaint.Config {
	if !o.InjectStartupTaint {
		return nil
	}
	agent, err := o.placement()
	p.Check("agent-placement", err)
	o.taintFlags().Check(p, api.AgentStartupTaintFlag, api.AgentUnhealthyTaintFlag)
	keys, kerr := o.taintKeys()
	if err != nil || kerr != nil { // reported above
		return nil
	}
	t, err := cli.ParseTaint(keys.Startup)
	if err != nil {
		p.Check(api.AgentStartupTaintFlag, err)
		return nil
	}
	return &startuptaint.Config{
		Inject:                 o.InjectStartupTaint,
		Observe:                o.observe(),
		Startup:                t,
		Ours:                   append([]string{t.Key}, keys.PreviousStartup...),
		Agent:                  agent,
		KarpenterReadinessKeys: o.KarpenterReadinessKeys,
	}
}

// newInjector is admission's startup taint decision from c (Resolve's),
// or nil when injection is off (c nil). cfg nil (no API access): NodePools
// are never read. sw is the operator's suspend switch (nil: none).
func newInjector(c *startuptaint.Config, cfg *rest.Config, sw *suspend.Switch) (*startuptaint.Injector, error) {
	if c == nil {
		return nil, nil
	}
	in := &startuptaint.Injector{Config: *c}
	if sw != nil {
		in.Suspend = sw
	}
	if cfg != nil {
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("startup taint: dynamic client: %w", err)
		}
		in.Pools = nodePools{dyn}
	}
	return in, nil
}

var nodePoolsGVR = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}

// nodePools reads Karpenter NodePools (karpenter.sh/v1).
type nodePools struct{ dyn dynamic.Interface }

func (p nodePools) StartupTaints(ctx context.Context, name string) ([]corev1.Taint, error) {
	u, err := p.dyn.Resource(nodePoolsGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var pool struct {
		Spec struct {
			Template struct {
				Spec struct {
					StartupTaints []corev1.Taint `json:"startupTaints"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &pool); err != nil {
		return nil, err
	}
	return pool.Spec.Template.Spec.StartupTaints, nil
}
