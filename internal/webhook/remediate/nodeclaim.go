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
	// deleting: Karpenter is deleting it already; nothing to delete.
	deleting bool
}

// claimCache holds one scan's NodeClaims, listed at most once.
type claimCache struct {
	listed bool
	items  []unstructured.Unstructured
	err    error
}

// nodeClaim finds the Karpenter NodeClaim that owns n: the one its owner
// reference names (with that UID), else the one whose status names the same
// provider ID (when both have one) or the node's name. nil, nil means none
// (or no usable NodeClaim API, logged once): delete the Node.
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
		case err == nil && (ref.UID == "" || obj.GetUID() == ref.UID):
			return refOf(obj), nil
		case err == nil:
			continue // a NodeClaim of the same name that is not the owner
		case c.unavailable(err):
			return nil, nil
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("get NodeClaim %s: %w", ref.Name, err)
		}
	}
	items, err := c.claims(ctx)
	if err != nil {
		if c.unavailable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	for i := range items {
		nodeName, _, _ := unstructured.NestedString(items[i].Object, "status", "nodeName")
		providerID, _, _ := unstructured.NestedString(items[i].Object, "status", "providerID")
		// Names are reused (ip-10-0-1-7 after ip-10-0-1-7): when both sides
		// have a provider ID, it decides.
		if providerID != "" && n.Spec.ProviderID != "" {
			if providerID == n.Spec.ProviderID {
				return refOf(&items[i]), nil
			}
			continue
		}
		if nodeName == n.Name {
			return refOf(&items[i]), nil
		}
	}
	return nil, nil
}

func refOf(obj *unstructured.Unstructured) *claimRef {
	return &claimRef{name: obj.GetName(), uid: obj.GetUID(), deleting: obj.GetDeletionTimestamp() != nil}
}

// claims lists the NodeClaims once per scan (from the watch cache).
func (c *Controller) claims(ctx context.Context) ([]unstructured.Unstructured, error) {
	cc := c.claimList
	if cc == nil {
		cc = &claimCache{}
	}
	if !cc.listed {
		list, err := c.dyn.Resource(NodeClaims).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		cc.listed, cc.err = true, err
		if err == nil {
			cc.items = list.Items
		}
	}
	return cc.items, cc.err
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
	if !c.claimsLog[kind] {
		c.claimsLog[kind] = true
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
