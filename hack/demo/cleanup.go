package main

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// attachVolume gives node a VolumeAttachment, as a CSI driver would, so its
// cleanup has something to do.
func attachVolume(ctx context.Context, cp *harness.ControlPlane, node string) error {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-pv-on-" + node},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: "ebs.csi.aws.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("demo-pv")},
		},
	}
	if _, err := cp.Client.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Printf("VolumeAttachment %s created for %s\n", va.Name, node)
	return nil
}
