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

// nodePoolList is the part of a NodePoolList the doctor reads.
type nodePoolList struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					StartupTaints []doctor.Taint `json:"startupTaints"`
					Taints        []doctor.Taint `json:"taints"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	} `json:"items"`
}

func (a *kubeAPI) ListNodePools(ctx context.Context) ([]doctor.NodePool, bool, error) {
	var out []doctor.NodePool
	served, err := a.listRaw(ctx, nodePoolsPath, "nodepools.karpenter.sh", func(body []byte) (string, error) {
		var l nodePoolList
		if err := json.Unmarshal(body, &l); err != nil {
			return "", err
		}
		for _, it := range l.Items {
			s := it.Spec.Template.Spec
			out = append(out, doctor.NodePool{Name: it.Metadata.Name, StartupTaints: s.StartupTaints, Taints: s.Taints})
		}
		return l.Metadata.Continue, nil
	})
	return out, served, err
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

// ruleList is the part of a NodeReadinessRuleList doctor reads.
type ruleList struct {
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Conditions []struct {
				Type string `json:"type"`
			} `json:"conditions"`
			Taint           doctor.Taint `json:"taint"`
			EnforcementMode string       `json:"enforcementMode"`
		} `json:"spec"`
	} `json:"items"`
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
	served, err := a.listRaw(ctx, nodeReadinessRulesPath, "nodereadinessrules.readiness.node.x-k8s.io", func(body []byte) (string, error) {
		var l ruleList
		if err := json.Unmarshal(body, &l); err != nil {
			return "", err
		}
		for _, it := range l.Items {
			r := doctor.ReadinessRule{Name: it.Metadata.Name, Taint: it.Spec.Taint, EnforcementMode: it.Spec.EnforcementMode}
			for _, c := range it.Spec.Conditions {
				r.Conditions = append(r.Conditions, c.Type)
			}
			out = append(out, r)
		}
		return l.Metadata.Continue, nil
	})
	return out, served, err
}
