package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// NodeAgents plays the agent's DaemonSet for Nodes the test does not create
// itself (Karpenter's): every Node a label selector matches gets an agent
// process, started as soon as the Node exists, as the DaemonSet controller
// and a kubelet would start its pod, and stopped once the Node is gone. The
// agent's pod is owned by a DaemonSet object (no controller runs it): a
// bare pod on a node would keep Karpenter from ever consolidating the node.
type NodeAgents struct {
	cp   *ControlPlane
	bin  string
	args []string
	sel  string

	mu      sync.Mutex
	agents  map[string]*Daemon
	started map[string]time.Time
	failed  map[string]bool
	pods    map[string]string // node -> its agent's pod
	errs    []error
}

// agentPollInterval is how often NodeAgents looks for new and gone Nodes.
const agentPollInterval = 100 * time.Millisecond

// RunNodeAgents starts an agent (AgentArgs, then args) on every Node that
// selector matches, now and until the test ends, each on an address of its
// own (NewAddress); the agents and their pods go when the test ends, their
// logs printed if it failed. The agent's RBAC must be applied first
// (ApplyChartRBAC).
func (cp *ControlPlane) RunNodeAgents(tb testing.TB, selector string, args ...string) *NodeAgents {
	tb.Helper()
	a := &NodeAgents{cp: cp, bin: BuiltBinary(tb, AgentBinary), args: args, sel: selector,
		agents: map[string]*Daemon{}, started: map[string]time.Time{}, failed: map[string]bool{}, pods: map[string]string{}}
	owner, err := cp.agentDaemonSet(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			a.sync(ctx, owner)
			select {
			case <-ctx.Done():
			case <-time.After(agentPollInterval):
			}
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
		a.mu.Lock()
		defer a.mu.Unlock()
		for name, d := range a.agents {
			a.stop(name, d)
			if tb.Failed() {
				tb.Logf("%s log:\n%s", d.Name, d.Tail(40))
			}
		}
		for node, pod := range a.pods { // pods of agents that failed to start
			_ = cp.Client.CoreV1().Pods(AgentNamespace).Delete(context.Background(), pod, metav1.DeleteOptions{})
			delete(a.pods, node)
		}
		if err := errors.Join(a.errs...); err != nil {
			tb.Errorf("agents for %s: %v", selector, err)
		}
	})
	return a
}

// Agent is the agent running for node, or nil.
func (a *NodeAgents) Agent(node string) *Daemon {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.agents[node]
}

// StartedAt is when the agent for node was started (zero if never).
func (a *NodeAgents) StartedAt(node string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.started[node]
}

// sync starts agents for new Nodes and stops those whose Node is gone.
func (a *NodeAgents) sync(ctx context.Context, owner *appsv1.DaemonSet) {
	nodes, err := a.cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: a.sel})
	if err != nil {
		return // the next poll tries again
	}
	live := map[string]bool{}
	for _, n := range nodes.Items {
		live[n.Name] = true
		a.mu.Lock()
		_, running := a.agents[n.Name]
		skip := running || a.failed[n.Name]
		a.mu.Unlock()
		if skip {
			continue
		}
		d, err := a.start(ctx, owner, n.Name)
		a.mu.Lock()
		if err != nil && ctx.Err() == nil {
			a.errs, a.failed[n.Name] = append(a.errs, err), true // told once, not retried
		} else if err == nil {
			a.agents[n.Name], a.started[n.Name] = d, time.Now()
		}
		a.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, d := range a.agents {
		if !live[name] {
			a.stop(name, d)
			delete(a.agents, name)
		}
	}
}

// start creates the agent's DaemonSet pod on node (named as the DaemonSet
// controller names its pods) and runs the agent with a token bound to it.
func (a *NodeAgents) start(ctx context.Context, owner *appsv1.DaemonSet, node string) (*Daemon, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: owner.Name + "-", Namespace: AgentNamespace,
			Labels: owner.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "DaemonSet", Name: owner.Name, UID: owner.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *owner.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	created, err := a.cp.Client.CoreV1().Pods(AgentNamespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("agent pod on %s: %w", node, err)
	}
	a.mu.Lock()
	a.pods[node] = created.Name
	a.mu.Unlock()
	token, err := a.cp.PodToken(ctx, created)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := a.cp.WriteKubeconfig(AgentServiceAccount+"-"+node, AgentServiceAccount, token)
	if err != nil {
		return nil, err
	}
	ip, err := a.cp.NewAddress()
	if err != nil {
		return nil, err
	}
	n := Node{Name: node, IP: ip}
	p, err := StartProcess(a.cp.Dir, "agent-"+node, a.bin, append(a.cp.AgentArgs(n, kubeconfig), a.args...), nil)
	if err != nil {
		return nil, err
	}
	return &Daemon{Process: p, IP: ip}, nil
}

// stop ends the agent for node and deletes its pod (no kubelet or pod
// garbage collector does here). The caller holds a.mu.
func (a *NodeAgents) stop(node string, d *Daemon) {
	if err := d.Stop(daemonStopGrace); err != nil {
		a.errs = append(a.errs, err)
	}
	err := a.cp.Client.CoreV1().Pods(AgentNamespace).Delete(context.Background(), a.pods[node],
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	if err != nil && !apierrors.IsNotFound(err) {
		a.errs = append(a.errs, fmt.Errorf("delete agent pod on %s: %w", node, err))
	}
	delete(a.pods, node)
}

// agentDaemonSet creates (or reads) the agent's DaemonSet object, the
// owner of the pods NodeAgents creates.
func (cp *ControlPlane) agentDaemonSet(ctx context.Context) (*appsv1.DaemonSet, error) {
	labels := map[string]string{"app": "kube-node-ready"}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: AgentServiceAccount, Namespace: AgentNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: AgentServiceAccount,
					Containers:         []corev1.Container{{Name: "agent", Image: "kube-node-ready-agent:harness"}},
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				},
			},
		},
	}
	created, err := cp.Client.AppsV1().DaemonSets(AgentNamespace).Create(ctx, ds, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = cp.Client.AppsV1().DaemonSets(AgentNamespace).Get(ctx, ds.Name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("agent DaemonSet: %w", err)
	}
	return created, nil
}
