package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

// cleanupConfig is the demo's cleanup configuration: detach the node's
// volumes (critical), then log the node's identity.
const cleanupConfig = `dryRun: false
plugins:
  volumeattachments: {critical: true, timeout: 30s}
  log: {after: [volumeattachments]}
`

// cleanupArgs writes the cleanup configuration and returns the webhook flags for it.
func cleanupArgs(cp *harness.ControlPlane) []string {
	path := filepath.Join(cp.Dir, "cleanup.yaml")
	if err := os.WriteFile(path, []byte(cleanupConfig), 0o644); err != nil {
		log.Fatalf("demo: %v", err)
	}
	return []string{"--config=" + path, "--pod-name=demo-webhook"}
}

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
