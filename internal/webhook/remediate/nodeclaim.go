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

// nodeClaim finds the Karpenter NodeClaim of n, as the NodeClaim says it:
// Karpenter writes the provider ID of the instance it launched and the name
// of the Node that registered for it into the NodeClaim's status. The Node's
// own ownerReferences are not asked: whoever may patch the Node could point
// them at any NodeClaim, a protected node's included. nil, nil means none
// (or no usable NodeClaim API, logged once).
func (c *Controller) nodeClaim(ctx context.Context, n *corev1.Node) (*claimRef, error) {
	if !c.cfg.NodeClaims {
		return nil, nil
	}
	items, err := c.claims(ctx)
	if err != nil {
		if c.unavailable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	for i := range items {
		if claimNames(&items[i], n) {
			return refOf(&items[i]), nil
		}
	}
	return nil, nil
}

// claimNames reports whether claim's status names n: its provider ID when
// both have one (names are reused, ip-10-0-1-7 after ip-10-0-1-7, an
// instance's ID is not), else its node name, and then a provider ID on
// only one side is no match either.
func claimNames(claim *unstructured.Unstructured, n *corev1.Node) bool {
	nodeName, _, _ := unstructured.NestedString(claim.Object, "status", "nodeName")
	providerID, _, _ := unstructured.NestedString(claim.Object, "status", "providerID")
	if providerID != "" && n.Spec.ProviderID != "" {
		return providerID == n.Spec.ProviderID && (nodeName == "" || nodeName == n.Name)
	}
	return providerID == "" && n.Spec.ProviderID == "" && nodeName != "" && nodeName == n.Name
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
