package kube

import (
	"context"
	"encoding/json"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// ListCSINodes lists CSINodes (callers select their node by field).
func (c *Client) ListCSINodes(ctx context.Context, opts metav1.ListOptions) (*storagev1.CSINodeList, error) {
	var l storagev1.CSINodeList
	err := c.storage.Get().Resource("csinodes").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// WatchCSINodes watches CSINodes (callers select their node by field).
func (c *Client) WatchCSINodes(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.storage.Get().Resource("csinodes").VersionedParams(&opts, parameterCodec).Watch(ctx)
}

// ResourceSlicesServed reports whether the API server serves
// resource.k8s.io/v1 (GA in Kubernetes 1.34; a cluster may turn it off),
// from its discovery document, which every authenticated client may read.
func (c *Client) ResourceSlicesServed(ctx context.Context) (bool, error) {
	var l metav1.APIResourceList
	body, err := c.resource.Get().AbsPath("/apis", resourcev1.SchemeGroupVersion.String()).Do(ctx).Raw()
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover %s: %w", resourcev1.SchemeGroupVersion, err)
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return false, fmt.Errorf("decode discovery of %s: %w", resourcev1.SchemeGroupVersion, err)
	}
	for _, r := range l.APIResources {
		if r.Name == "resourceslices" {
			return true, nil
		}
	}
	return false, nil
}

// ListResourceSlices lists ResourceSlices (callers select their node by field).
func (c *Client) ListResourceSlices(ctx context.Context, opts metav1.ListOptions) (*resourcev1.ResourceSliceList, error) {
	var l resourcev1.ResourceSliceList
	err := c.resource.Get().Resource("resourceslices").VersionedParams(&opts, parameterCodec).Do(ctx).Into(&l)
	return &l, err
}

// WatchResourceSlices watches ResourceSlices (callers select their node by field).
func (c *Client) WatchResourceSlices(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.resource.Get().Resource("resourceslices").VersionedParams(&opts, parameterCodec).Watch(ctx)
}
