package harness

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The real Karpenter controller with its KWOK cloud provider
// (sigs.k8s.io/karpenter/kwok, built by `make tools` into bin/karpenter)
// against a control plane: it watches pods the scheduler marked
// unschedulable, creates NodeClaims for them and, as its "cloud", the Node
// objects themselves (annotated for KWOK, which makes them Ready). Nothing
// about Karpenter is simulated: its CRDs come from its pinned module, and
// what it decides (launch, register, initialize, disrupt, terminate) is its
// own code's.

var (
	// NodePools and NodeClaims are Karpenter's resources.
	NodePools  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	NodeClaims = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	// KWOKNodeClasses are the KWOK provider's node classes.
	KWOKNodeClasses = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

const (
	// KarpenterNodeClass is the KWOKNodeClass StartKarpenter creates, which
	// every NodePool of NewNodePool launches from.
	KarpenterNodeClass = "default"
	// NodePoolLabel is the label Karpenter puts on its NodeClaims and Nodes:
	// the NodePool they belong to.
	NodePoolLabel = "karpenter.sh/nodepool"
	// karpenterWait bounds Karpenter's start.
	karpenterWait = 60 * time.Second
	// poolRemovalWait bounds a NodePool's removal: Karpenter drains and
	// terminates its nodes in parallel, about 5 s each, but a dozen at
	// once on a busy machine took over a minute.
	poolRemovalWait = 2 * time.Minute
)

// KarpenterOptions shapes the Karpenter controller.
type KarpenterOptions struct {
	// Name names the process and its log (default "karpenter").
	Name string
	// FeatureGates is Karpenter's --feature-gates, such as "NodeRepair=true";
	// empty keeps its defaults.
	FeatureGates string
	// Args are further flags of Karpenter's (--batch-idle-duration, ...).
	Args []string
}

// Karpenter is the running controller.
type Karpenter struct {
	*Process
	// MetricsURL is its Prometheus endpoint.
	MetricsURL string
}

// StartKarpenter installs Karpenter's CRDs and the KWOK provider's, the
// KWOKNodeClass KarpenterNodeClass and the default/default ServiceAccount
// (no kube-controller-manager creates it here, and pods need it), then runs
// Karpenter against the plane as its admin and waits until it is ready. It
// needs kube-scheduler (StartScheduler) to see anything to do, and KWOK
// (StartKWOK) for its Nodes to turn Ready. Karpenter has no --kubeconfig:
// it reads KUBECONFIG; leader election is off, and its metrics and health
// ports are free ports, away from the MetricsPort of the simulated nodes'
// agents. It is stopped with the plane.
func (cp *ControlPlane) StartKarpenter(ctx context.Context, opts KarpenterOptions) (*Karpenter, error) {
	if opts.Name == "" {
		opts.Name = "karpenter"
	}
	if err := cp.InstallCRDs(ctx, "karpenter"); err != nil {
		return nil, err
	}
	if err := cp.InstallCRDs(ctx, "karpenter-kwok"); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	if _, err := cp.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("default ServiceAccount: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		return nil, err
	}
	nodeClass := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
		"metadata": map[string]any{"name": KarpenterNodeClass},
	}}
	if _, err := dyn.Resource(KWOKNodeClasses).Create(ctx, nodeClass, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("KWOKNodeClass: %w", err)
	}
	metricsPort, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	healthPort, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	args := []string{
		"--disable-leader-election",
		"--metrics-port=" + strconv.Itoa(metricsPort),
		"--health-probe-port=" + strconv.Itoa(healthPort),
	}
	if opts.FeatureGates != "" {
		args = append(args, "--feature-gates="+opts.FeatureGates)
	}
	bin, err := LaterTool(ctx, cp.BinDir, "karpenter")
	if err != nil {
		return nil, fmt.Errorf("karpenter: %w", err)
	}
	p, err := StartProcess(cp.Dir, opts.Name, bin, append(args, opts.Args...),
		[]string{"KUBECONFIG=" + cp.Kubeconfig})
	if err != nil {
		return nil, err
	}
	cp.addExtra(p)
	readyz := "http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz"
	hc := &http.Client{Timeout: time.Second}
	err = waitFor(ctx, p, karpenterWait, func() (bool, error) {
		resp, err := hc.Get(readyz)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return nil, fmt.Errorf("karpenter not ready: %w", err)
	}
	return &Karpenter{Process: p, MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics"}, nil
}

// Metric sums Karpenter's samples of name whose labels contain all of match.
func (k *Karpenter) Metric(name string, match ...string) (float64, error) {
	return ScrapeMetric(k.MetricsURL, name, match...)
}
