package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/kubectlplugin/doctor"
)

// nodePoolsPath is Karpenter's NodePool API (karpenter.sh/v1), read
// without a typed client: only the fields the doctor needs are decoded.
const nodePoolsPath = "/apis/karpenter.sh/v1/nodepools"

func (a *kubeAPI) ListDaemonSets(ctx context.Context, namespace string) ([]appsv1.DaemonSet, error) {
	dss, err := listPages(ctx, metav1.ListOptions{}, func(ctx context.Context, opts metav1.ListOptions) ([]appsv1.DaemonSet, string, error) {
		l, err := a.client.AppsV1().DaemonSets(namespace).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return dss, explain(err, "list", "daemonsets.apps"+scope(namespace), "")
}

func (a *kubeAPI) ListDeployments(ctx context.Context, namespace string) ([]appsv1.Deployment, error) {
	deps, err := listPages(ctx, metav1.ListOptions{}, func(ctx context.Context, opts metav1.ListOptions) ([]appsv1.Deployment, string, error) {
		l, err := a.client.AppsV1().Deployments(namespace).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return deps, explain(err, "list", "deployments.apps"+scope(namespace), "")
}

func (a *kubeAPI) ListControllerRevisions(ctx context.Context, namespace string) ([]appsv1.ControllerRevision, error) {
	revs, err := listPages(ctx, metav1.ListOptions{}, func(ctx context.Context, opts metav1.ListOptions) ([]appsv1.ControllerRevision, string, error) {
		l, err := a.client.AppsV1().ControllerRevisions(namespace).List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return l.Items, l.Continue, nil
	})
	return revs, explain(err, "list", "controllerrevisions.apps"+scope(namespace), "")
}

// nodePoolSpec is the part of a NodePool's spec the doctor reads.
type nodePoolSpec struct {
	Template struct {
		Spec struct {
			StartupTaints []doctor.Taint `json:"startupTaints"`
			Taints        []doctor.Taint `json:"taints"`
		} `json:"spec"`
	} `json:"template"`
}

func (a *kubeAPI) ListNodePools(ctx context.Context) ([]doctor.NodePool, bool, error) {
	var out []doctor.NodePool
	served, err := listCustom(ctx, a, nodePoolsPath, "nodepools.karpenter.sh", func(name string, spec nodePoolSpec) {
		s := spec.Template.Spec
		out = append(out, doctor.NodePool{Name: name, StartupTaints: s.StartupTaints, Taints: s.Taints})
	})
	return out, served, err
}

// customList is the part of a custom resource's list the doctor decodes:
// the continue token, and each item's name and the part S of its spec.
type customList[S any] struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec S `json:"spec"`
	} `json:"items"`
}

// listCustom lists the custom resources at path page by page, without a
// typed client, handing each item's name and spec to item. served is false
// when the API server does not serve the resource; resource names it in
// errors.
func listCustom[S any](ctx context.Context, a *kubeAPI, path, resource string, item func(name string, spec S)) (served bool, err error) {
	return a.listRaw(ctx, path, resource, func(body []byte) (string, error) {
		var l customList[S]
		if err := json.Unmarshal(body, &l); err != nil {
			return "", err
		}
		for _, it := range l.Items {
			item(it.Metadata.Name, it.Spec)
		}
		return l.Metadata.Continue, nil
	})
}

// listRaw lists the custom resources at path page by page, without a
// typed client, handing each page's body to page, which decodes what it
// needs and returns the page's continue token. served is false when the
// API server does not serve the resource; resource names it in errors.
func (a *kubeAPI) listRaw(ctx context.Context, path, resource string, page func(body []byte) (cont string, err error)) (served bool, err error) {
	rc := a.client.Discovery().RESTClient()
	cont := ""
	for {
		req := rc.Get().AbsPath(path).Param("limit", strconv.Itoa(listChunk))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		body, err := req.DoRaw(ctx)
		err = withStatus(err, body)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return true, explain(err, "list", resource, "")
		}
		if cont, err = page(body); err != nil {
			return true, fmt.Errorf("list %s: decode: %w", resource, err)
		}
		if cont == "" {
			return true, nil
		}
	}
}

// withStatus is err with the API server's own Status from body, which a
// raw request leaves undecoded ("unknown"); err unchanged otherwise.
func withStatus(err error, body []byte) error {
	var st metav1.Status
	if err == nil || json.Unmarshal(body, &st) != nil || st.Kind != "Status" || st.Message == "" {
		return err
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// scope says where a namespaced list looked: " in namespace X" or " in all
// namespaces".
func scope(namespace string) string {
	if namespace == "" {
		return " in all namespaces"
	}
	return " in namespace " + namespace
}

// nodeReadinessRulesPath is the controller's API
// (readiness.node.x-k8s.io/v1alpha1), read without a typed client.
const (
	nodeReadinessGroupVersion = "readiness.node.x-k8s.io/v1alpha1"
	nodeReadinessRulesPath    = "/apis/" + nodeReadinessGroupVersion + "/nodereadinessrules"
)

// ruleSpec is the part of a NodeReadinessRule's spec doctor reads.
type ruleSpec struct {
	Conditions []struct {
		Type string `json:"type"`
	} `json:"conditions"`
	Taint           doctor.Taint `json:"taint"`
	EnforcementMode string       `json:"enforcementMode"`
}

func (a *kubeAPI) ListNodeReadinessRules(ctx context.Context) ([]doctor.ReadinessRule, bool, error) {
	// Discovery first, which every user may read: a user without list on
	// an API the cluster does not serve is refused (403) before the API
	// server says it is not there (404), and most clusters run no
	// controller.
	if _, err := a.client.Discovery().ServerResourcesForGroupVersion(nodeReadinessGroupVersion); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, explain(err, "discover", nodeReadinessGroupVersion, "")
	}
	var out []doctor.ReadinessRule
	served, err := listCustom(ctx, a, nodeReadinessRulesPath, "nodereadinessrules.readiness.node.x-k8s.io", func(name string, spec ruleSpec) {
		r := doctor.ReadinessRule{Name: name, Taint: spec.Taint, EnforcementMode: spec.EnforcementMode}
		for _, c := range spec.Conditions {
			r.Conditions = append(r.Conditions, c.Type)
		}
		out = append(out, r)
	})
	return out, served, err
}
