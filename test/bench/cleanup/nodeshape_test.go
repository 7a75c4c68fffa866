//go:build e2e

package cleanup

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The cloud-shaped Node: what the benchmarks' "realistic" nodes carry, so
// that a figure of memory or time per node is one of a real cluster's
// nodes. Its shape is the one issue 35 (R12) measured on a cloud
// provider's nodes: 61 labels (the kubelet's well-known ones, Karpenter's
// and the EC2 provider's, topology, the team's own, and Node Feature
// Discovery's CPU, kernel and OS features), 9 annotations (one of them the
// CSI node-id JSON, one NFD's list of the labels it set), 30 images with a
// digest and a tag each, capacity and allocatable, 4 conditions, 3
// addresses and nodeInfo: about 16.3 KiB of JSON as a GET of the Node
// returns it, managedFields included. (Until issue 35 the benchmarks used
// 19 labels, 6 annotations and 20 images: 9.1 KiB.) createNodes adds the
// label "bench", the 61st.
const (
	cloudLabels      = 61
	cloudAnnotations = 9
	cloudImages      = 30
)

// nfdFeatures are the Node Feature Discovery labels of an Intel m6i
// instance, without their feature.node.kubernetes.io/ prefix.
var nfdFeatures = []string{
	"cpu-cpuid.ADX", "cpu-cpuid.AESNI", "cpu-cpuid.AVX", "cpu-cpuid.AVX2", "cpu-cpuid.AVX512BW",
	"cpu-cpuid.AVX512F", "cpu-cpuid.AVX512VL", "cpu-cpuid.AVX512VNNI", "cpu-cpuid.FMA3",
	"cpu-cpuid.SHA", "cpu-cpuid.VAES", "cpu-hardware_multithreading", "cpu-model.family",
	"cpu-model.id", "cpu-model.vendor_id", "kernel-version.full", "kernel-version.major",
	"kernel-version.minor", "storage-nonrotationaldisk", "system-os_release.ID",
	"system-os_release.VERSION_ID",
}

// nfdValue is the value NFD gives feature f.
func nfdValue(f string) string {
	switch f {
	case "cpu-model.family":
		return "6"
	case "cpu-model.id":
		return "106"
	case "cpu-model.vendor_id":
		return "Intel"
	case "kernel-version.full":
		return "6.1.112-124.190.amzn2023.x86_64"
	case "kernel-version.major":
		return "6"
	case "kernel-version.minor":
		return "1"
	case "system-os_release.ID":
		return "amzn"
	case "system-os_release.VERSION_ID":
		return "2023"
	}
	return "true"
}

// decorate gives node the cloud shape (see cloudLabels); i makes its
// addresses, IDs and zone its own.
func decorate(node *corev1.Node, i int) {
	name := node.Name
	zone := []string{"a", "b", "c"}[i%3]
	labels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
		"node.kubernetes.io/instance-type": "m6i.2xlarge", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
		"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": "eu-west-1" + zone,
		"failure-domain.beta.kubernetes.io/region": "eu-west-1", "failure-domain.beta.kubernetes.io/zone": "eu-west-1" + zone,
		"topology.ebs.csi.aws.com/zone": "eu-west-1" + zone, "topology.k8s.aws/zone-id": "euw1-az" + fmt.Sprint(i%3+1),
		"topology.k8s.aws/network-node-layer-1": fmt.Sprintf("nn-%017x", i%7), "topology.k8s.aws/network-node-layer-2": fmt.Sprintf("nn-%017x", i%31),
		"topology.k8s.aws/network-node-layer-3": fmt.Sprintf("nn-%017x", i%127),
		"karpenter.sh/nodepool":                 "general-purpose", "karpenter.sh/capacity-type": "on-demand",
		"karpenter.sh/registered": "true", "karpenter.sh/initialized": "true", "karpenter.k8s.aws/ec2nodeclass": "default",
		"karpenter.k8s.aws/instance-category": "m", "karpenter.k8s.aws/instance-family": "m6i", "karpenter.k8s.aws/instance-generation": "6",
		"karpenter.k8s.aws/instance-size": "2xlarge", "karpenter.k8s.aws/instance-cpu": "8", "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
		"karpenter.k8s.aws/instance-memory": "32768", "karpenter.k8s.aws/instance-hypervisor": "nitro",
		"karpenter.k8s.aws/instance-ebs-bandwidth": "10000", "karpenter.k8s.aws/instance-network-bandwidth": "3125",
		"karpenter.k8s.aws/instance-encryption-in-transit-supported": "true",
		"k8s.io/cloud-provider-aws":                                  "3f1c9f1e8d2a4b7c9e0f1a2b3c4d5e6f", "vpc.amazonaws.com/has-trunk-attached": "false",
		"team": "platform", "environment": "production", "cost-center": "cc-1234", "workload-class": "general",
		"node-ready/verified": "true",
	}
	for _, f := range nfdFeatures {
		labels["feature.node.kubernetes.io/"+f] = nfdValue(f)
	}
	for k, v := range labels {
		node.Labels[k] = v
	}
	node.Annotations = map[string]string{
		"node.alpha.kubernetes.io/ttl":                           "0",
		"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		"alpha.kubernetes.io/provided-node-ip":                   fmt.Sprintf("10.0.%d.%d", i/250, i%250),
		"karpenter.sh/nodepool-hash":                             "4012513481623584108",
		"karpenter.sh/nodepool-hash-version":                     "v3",
		"karpenter.k8s.aws/ec2nodeclass-hash":                    "15616957348189460630",
		"karpenter.k8s.aws/ec2nodeclass-hash-version":            "v4",
		"csi.volume.kubernetes.io/nodeid":                        fmt.Sprintf(`{"ebs.csi.aws.com":"i-0%015x","efs.csi.aws.com":"i-0%015x"}`, i, i),
		"nfd.node.kubernetes.io/feature-labels":                  strings.Join(nfdFeatures, ","),
	}
	q := resource.MustParse
	node.Spec.ProviderID = fmt.Sprintf("aws:///eu-west-1%s/i-0%015x", zone, i)
	node.Spec.PodCIDR = fmt.Sprintf("100.64.%d.0/24", i%250)
	st := &node.Status
	st.Capacity = corev1.ResourceList{"cpu": q("8"), "memory": q("32080868Ki"), "pods": q("58"), "ephemeral-storage": q("104845292Ki"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0")}
	st.Allocatable = corev1.ResourceList{"cpu": q("7910m"), "memory": q("31064036Ki"), "pods": q("58"), "ephemeral-storage": q("95551679124"), "hugepages-1Gi": q("0"), "hugepages-2Mi": q("0")}
	now := metav1.Now()
	for _, c := range []struct{ t, s, r string }{
		{"MemoryPressure", "False", "KubeletHasSufficientMemory"}, {"DiskPressure", "False", "KubeletHasNoDiskPressure"},
		{"PIDPressure", "False", "KubeletHasSufficientPID"}, {"Ready", "True", "KubeletReady"},
	} {
		st.Conditions = append(st.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(c.t), Status: corev1.ConditionStatus(c.s), Reason: c.r, Message: "kubelet is posting ready status", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	st.Addresses = []corev1.NodeAddress{{Type: "InternalIP", Address: fmt.Sprintf("10.0.%d.%d", i/250, i%250)}, {Type: "Hostname", Address: name}, {Type: "InternalDNS", Address: name + ".eu-west-1.compute.internal"}}
	st.NodeInfo = corev1.NodeSystemInfo{MachineID: fmt.Sprintf("ec2%029x", i), SystemUUID: fmt.Sprintf("ec2%029x", i), BootID: fmt.Sprintf("%032x", i), KernelVersion: "6.1.112-124.190.amzn2023.x86_64", OSImage: "Amazon Linux 2023.6.20241031", ContainerRuntimeVersion: "containerd://1.7.22", KubeletVersion: "v1.36.3-eks-7f9249a", OperatingSystem: "linux", Architecture: "amd64"}
	for j := range cloudImages {
		st.Images = append(st.Images, corev1.ContainerImage{Names: []string{fmt.Sprintf("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/platform-image-%d@sha256:%064x", j, j), fmt.Sprintf("602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/platform-image-%d:v1.%d.0-eks", j, j)}, SizeBytes: int64(10_000_000 + j*1_000_000)})
	}
}

// shape is what a GET of one benchmark Node returns.
type shape struct {
	kib                                     float64
	labels, annotations, images, conditions int
}

func (s shape) String() string {
	return fmt.Sprintf("%.1f KiB of JSON (%d labels, %d annotations, %d images, %d conditions)", s.kib, s.labels, s.annotations, s.images, s.conditions)
}

// nodeShape reads Node name back and fails b unless it has the cloud shape,
// so a figure is never reported for nodes of another shape.
func nodeShape(b *testing.B, c kubernetes.Interface, name string) shape {
	b.Helper()
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + name).DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	n, err := c.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	s := shape{kib: float64(len(raw)) / 1024, labels: len(n.Labels), annotations: len(n.Annotations), images: len(n.Status.Images), conditions: len(n.Status.Conditions)}
	if s.labels != cloudLabels || s.annotations != cloudAnnotations || s.images != cloudImages {
		b.Fatalf("node %s is not cloud-shaped: %s", name, s)
	}
	return s
}
