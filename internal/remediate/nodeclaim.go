package remediate

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

type claimRef struct {
	name string
	uid  types.UID
}

// nodeClaim finds the Karpenter NodeClaim that owns n: its owner reference,
// else the one whose status names the node or its provider ID. nil, nil
// means none (or no usable NodeClaim API, logged once): delete the Node.
func (c *Controller) nodeClaim(ctx context.Context, n *corev1.Node) (*claimRef, error) {
	if !c.cfg.NodeClaims {
		return nil, nil
	}
	res := c.dyn.Resource(NodeClaims)
	for _, ref := range n.OwnerReferences {
		if ref.Kind != "NodeClaim" || ref.APIVersion != NodeClaims.GroupVersion().String() {
			continue
		}
		obj, err := res.Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			return &claimRef{name: obj.GetName(), uid: obj.GetUID()}, nil
		case c.unavailable(err):
			return nil, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("get NodeClaim %s: %w", ref.Name, err)
		}
	}
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		if c.unavailable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	for _, item := range list.Items {
		nodeName, _, _ := unstructured.NestedString(item.Object, "status", "nodeName")
		providerID, _, _ := unstructured.NestedString(item.Object, "status", "providerID")
		if nodeName == n.Name || providerID != "" && providerID == n.Spec.ProviderID {
			return &claimRef{name: item.GetName(), uid: item.GetUID()}, nil
		}
	}
	return nil, nil
}

// unavailable reports whether err means there is no NodeClaim API to use
// (not installed, or this replica may not read it), logging that once per
// kind: the Node is deleted instead.
func (c *Controller) unavailable(err error) bool {
	var kind string
	switch {
	case apierrors.IsNotFound(err) && isMissingResource(err), meta.IsNoMatchError(err):
		kind = "absent"
	case apierrors.IsForbidden(err):
		kind = "forbidden"
	default:
		return false
	}
	if _, logged := c.claimsOnce.LoadOrStore(kind, struct{}{}); !logged {
		c.log.Warn("the Karpenter NodeClaim API is "+kind+"; replacing nodes by deleting the Node instead",
			"resource", NodeClaims.String(), "error", err)
	}
	return true
}

// isMissingResource tells "the resource type is not served" (a 404 without
// details of an object) from "this object does not exist".
func isMissingResource(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}
