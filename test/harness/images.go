package harness

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
)

// ImageRef is the image reference recorded in an OCI layout tarball written
// by knr-image (`make images`): the io.containerd.image.name annotation of
// its index entry, which is the name containerd imports it under.
func ImageRef(tarball string) (string, error) {
	f, err := os.Open(tarball)
	if err != nil {
		return "", fmt.Errorf("image %s: %w (run `make images` / `make tools`)", tarball, err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("image %s: no index.json: not an OCI layout tarball", tarball)
		}
		if err != nil {
			return "", fmt.Errorf("image %s: %w", tarball, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("image %s: index.json: %w", tarball, err)
		}
		for _, m := range index.Manifests {
			if ref := m.Annotations["io.containerd.image.name"]; ref != "" {
				return ref, nil
			}
		}
		return "", fmt.Errorf("image %s: index.json names no image", tarball)
	}
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
