//go:build e2e

package karpenter

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// injectIP is the webhook of TestInjectedTaintWithKarpenter, run with
	// the chart's admission arguments under autoscaler=karpenter.
	injectIP = "10.213.0.40"
	// gateAddr is what the slow pool's agents probe: nothing listens there
	// until the test opens it, so their node stays unverified until then.
	gateAddr = "10.213.0.41:9000"
)

// TestInjectedTaintWithKarpenter: the chart's defaults but
// autoscaler=karpenter, with NodePools that declare none of our keys, so
// the only startup taint is the one admission adds at Node creation. The
// slow pool's node is held unverified while Karpenter simulates the pod 30
// more times and its agent fails 10 more rounds: one NodeClaim for its
// pending pod, never a second;
// then it verifies, loses the taint, and the pod is bound after the
// untaint. A NodePool that declares a key of ours gets that key from
// admission, and no second from Karpenter's registration.
func TestInjectedTaintWithKarpenter(t *testing.T) {
	cp := harness.StartT(t, harness.Options{})
	ctx := t.Context()
	if err := cp.StartScheduler(); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.StartKWOK(harness.KWOKOptions{}); err != nil {
		t.Fatal(err)
	}
	karp, err := cp.StartKarpenter(ctx, harness.KarpenterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cp: cp, dyn: dyn, karp: karp}

	// The webhook as the chart configures it: RBAC (the NodePool read
	// among it), admission arguments and configuration from one render.
	set := []string{"autoscaler=karpenter"}
	if err := cp.ApplyChartRBAC(ctx, ns, set...); err != nil {
		t.Fatal(err)
	}
	chart, err := cp.RenderChartWebhook(ctx, ns, "https://"+injectIP+":8443/mutate-node", "", set...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, chart.Config, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.ServiceAccountKubeconfig(ctx, ns, harness.WebhookServiceAccount)
	if err != nil {
		t.Fatal(err)
	}
	e.w = cp.StartWebhook(t, "webhook", injectIP, append([]string{
		"--kubeconfig=" + kubeconfig, "--namespace=" + ns, "--pod-name=webhook", "--extra-sans=" + injectIP,
		"--webhook-config-name=" + chart.Config.Name, "--log-level=debug",
	}, chart.Args...)...)
	e.w.WaitReady(t, 30*time.Second)
	harness.WaitFor(t, 30*time.Second, "a new Node gets our finalizer from admission", func() bool {
		n, err := cp.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"}}, metav1.CreateOptions{})
		if err != nil {
			return false
		}
		cp.RemoveNode(t, n.Name)
		return slices.Contains(n.Finalizers, harness.Finalizer)
	})

	nodes := watchNodes(t, cp)
	pods, err := cp.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer pods.Stop()
	bound := map[string]podBinding{}
	var boundMu sync.Mutex
	go func() {
		for ev := range pods.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.Spec.NodeName == "" {
				continue
			}
			boundMu.Lock()
			if _, seen := bound[p.Name]; !seen {
				bound[p.Name] = podBinding{node: p.Spec.NodeName, rv: resourceVersion(p.ResourceVersion), at: time.Now()}
			}
			boundMu.Unlock()
		}
	}()

	// The slow pool: nothing declared; its agents verify once gateAddr answers.
	const slow = "inject-slow"
	agents := e.pool(t, slow, harness.NodePoolOptions{}, []string{"--autoscaler=karpenter", "--checks=probe",
		"--check.probe.targets=tcp://" + gateAddr, "--check-period=2s", "--initial-backoff=500ms"})
	e.pendingPod(t, "inject-slow-0", slow)
	w := e.watchClaims(slow)
	var node string
	harness.Eventually(t, time.Minute, "a NodeClaim launched and its Node registered", func() (bool, string) {
		alive := w.poll(t, 1)
		if len(alive) == 0 {
			return false, "no NodeClaim yet"
		}
		n := e.node(t, claimProviderNode(alive[0]))
		if n == nil || hasTaint(n, "karpenter.sh/unregistered") {
			return false, "node not registered"
		}
		node = n.Name
		return true, ""
	})
	first := nodes.first(t, node)
	if got := ourStartupKeys(first); !slices.Equal(got, []string{api.KarpenterStartupTaintKey}) {
		t.Fatalf("node %s created with our keys %v, want [%s] from admission", node, got, api.KarpenterStartupTaintKey)
	}
	if mark := first.Annotations[api.StartupTaintAdmissionAnnotation]; mark != "added" {
		t.Errorf("node %s marked %q, want added", node, mark)
	}
	grown, ran, _ := w.holdRounds(t, 1, agents, node)
	if len(w.seen) != 1 {
		t.Fatalf("pool %s: %d NodeClaims for one pending pod while its node was being verified, want 1", slow, len(w.seen))
	}
	if p := e.pod(t, "inject-slow-0"); p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s while it carried the startup taint", p.Spec.NodeName)
	}
	if got := ourStartupKeys(e.node(t, node)); !slices.Equal(got, []string{api.KarpenterStartupTaintKey}) {
		t.Fatalf("after registration node %s carries %v, want the one key admission added", node, got)
	}

	// Let it verify: the pod is bound after the untaint.
	opened := time.Now()
	harness.ServeHTTP(t, gateAddr, http.NotFoundHandler())
	var untaint uint64
	harness.Eventually(t, time.Minute, "the node verified and untainted", func() (bool, string) {
		untaint = nodes.untaintRV(node)
		return untaint != 0, "still tainted"
	})
	harness.Eventually(t, time.Minute, "the pod bound", func() (bool, string) {
		boundMu.Lock()
		defer boundMu.Unlock()
		_, ok := bound["inject-slow-0"]
		return ok, "not bound"
	})
	boundMu.Lock()
	b := bound["inject-slow-0"]
	boundMu.Unlock()
	if b.node != node || b.rv <= untaint {
		t.Errorf("pod bound to %s at resourceVersion %d; the node %s lost its taint at %d: want the same node, after", b.node, b.rv, node, untaint)
	}
	w.poll(t, 1)
	if len(w.seen) != 1 {
		t.Errorf("pool %s: %d NodeClaims in all, want 1", slow, len(w.seen))
	}
	t.Logf("figure: injected readiness.k8s.io/node-ready, NodePool declaring nothing: %d NodeClaim for 1 pending pod while Karpenter simulated it %v times and the agent failed %v rounds; gate opened -> pod bound %s",
		len(w.seen), grown, ran, b.at.Sub(opened).Round(10*time.Millisecond))

	// A NodePool that declares a key of ours: admission adds that key, and
	// Karpenter's registration adds no second.
	const declared = "inject-declared"
	e.pool(t, declared, harness.NodePoolOptions{StartupTaints: []corev1.Taint{ourTaint}}, []string{"--autoscaler=karpenter"})
	e.pendingPod(t, "inject-declared-0", declared)
	dw := e.watchClaims(declared)
	var dnode string
	harness.Eventually(t, time.Minute, "the declared pool's pod bound", func() (bool, string) {
		alive := dw.poll(t, 1)
		if len(alive) == 0 {
			return false, "no NodeClaim yet"
		}
		dnode = claimProviderNode(alive[0])
		p := e.pod(t, "inject-declared-0")
		return p.Spec.NodeName != "", "not bound"
	})
	if got := ourStartupKeys(nodes.first(t, dnode)); !slices.Equal(got, []string{ourTaint.Key}) {
		t.Errorf("node %s of a NodePool declaring %s created with our keys %v", dnode, ourTaint.Key, got)
	}
	if most := nodes.mostKeys(dnode); most != 1 {
		t.Errorf("node %s carried %d startup keys of ours at once, want 1", dnode, most)
	}
}

type podBinding struct {
	node string
	rv   uint64
	at   time.Time
}

// resourceVersion reads an object's resourceVersion, an etcd revision:
// comparable across kinds on one API server.
func resourceVersion(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

// nodeLog records, from a watch, each node's first version, the most
// startup keys of ours it carried at once, and the resourceVersion of the
// first version without any after it had one.
type nodeLog struct {
	mu      sync.Mutex
	firsts  map[string]*corev1.Node
	most    map[string]int
	untaint map[string]uint64
}

func watchNodes(t *testing.T, cp *harness.ControlPlane) *nodeLog {
	t.Helper()
	w, err := cp.Client.CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	l := &nodeLog{firsts: map[string]*corev1.Node{}, most: map[string]int{}, untaint: map[string]uint64{}}
	go func() {
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			l.mu.Lock()
			if _, seen := l.firsts[n.Name]; !seen {
				l.firsts[n.Name] = n
			}
			k := len(ourStartupKeys(n))
			l.most[n.Name] = max(l.most[n.Name], k)
			if k == 0 && l.most[n.Name] > 0 && l.untaint[n.Name] == 0 {
				l.untaint[n.Name] = resourceVersion(n.ResourceVersion)
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *nodeLog) first(t *testing.T, name string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	harness.WaitFor(t, 10*time.Second, "the watch shows node "+name, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		n = l.firsts[name]
		return n != nil
	})
	return n
}

func (l *nodeLog) untaintRV(name string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.untaint[name]
}

func (l *nodeLog) mostKeys(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.most[name]
}

// ourStartupKeys are the startup keys of ours n carries.
func ourStartupKeys(n *corev1.Node) []string {
	var keys []string
	for _, t := range n.Spec.Taints {
		if slices.Contains(api.PreviousStartupTaintKeys(), t.Key) {
			keys = append(keys, t.Key)
		}
	}
	return keys
}
