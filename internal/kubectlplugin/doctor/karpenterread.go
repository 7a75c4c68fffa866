package doctor

import (
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// karpenterName is the app.kubernetes.io/name Karpenter's charts (the
// AWS and Azure providers', core's KWOK one) put on its Deployment, and
// the name its images go by.
const karpenterName = "karpenter"

// isKarpenter says whether a container runs Karpenter's controller: its
// image is named karpenter, or controller under a karpenter repository
// (public.ecr.aws/karpenter/controller, mcr.microsoft.com/aks/karpenter/controller).
func isKarpenter(c corev1.Container) bool {
	name := imageName(c.Image)
	if strings.HasPrefix(name, karpenterName) {
		return true
	}
	ref, _, _ := strings.Cut(c.Image, "@")
	return name == "controller" && path.Base(path.Dir(ref)) == karpenterName
}

// readKarpenter reads which Karpenter a Deployment runs; ok is false when
// it runs none. The version is its release as deployed: the tag of its
// controller image (1.14.1 in .../karpenter/controller:1.14.1@sha256:...),
// else the Deployment's app.kubernetes.io/version label, else its
// helm.sh/chart label (karpenter-1.14.1); empty when none names a release.
// A provider's release is taken for core's: the AWS provider and core's
// KWOK provider are released with core's numbers.
func readKarpenter(d *appsv1.Deployment) (k Karpenter, ok bool) {
	image := ""
	for _, c := range d.Spec.Template.Spec.Containers {
		if isKarpenter(c) {
			image, ok = c.Image, true
			break
		}
	}
	if !ok && d.Labels[nameLabel] != karpenterName {
		return k, false
	}
	k.Deployment = "Deployment " + d.Namespace + "/" + d.Name
	if tag := imageTag(image); tag != "" {
		if _, valid := ParseKarpenterVersion(tag); valid {
			ref, _, _ := strings.Cut(image, "@")
			k.Version, k.VersionFrom = strings.TrimPrefix(tag, "v"), "its image "+ref
			return k, true
		}
	}
	if v := d.Labels[versionLabel]; v != "" {
		if _, valid := ParseKarpenterVersion(v); valid {
			k.Version, k.VersionFrom = strings.TrimPrefix(v, "v"), "its label "+versionLabel+"="+v
			return k, true
		}
	}
	if c, found := strings.CutPrefix(d.Labels[chartLabel], karpenterName+"-"); found {
		if _, valid := ParseKarpenterVersion(c); valid {
			k.Version, k.VersionFrom = strings.TrimPrefix(c, "v"), "its label "+chartLabel+"="+d.Labels[chartLabel]
		}
	}
	return k, true
}

// imageTag is an image reference's tag: 1.14.1 in
// public.ecr.aws/karpenter/controller:1.14.1@sha256:..., "" when it has
// none (a digest alone; a registry's port is not in the last element).
func imageTag(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	_, tag, _ := strings.Cut(path.Base(ref), ":")
	return tag
}
