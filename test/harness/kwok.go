package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// KWOK (sigs.k8s.io/kwok, built by `make tools` into bin/kwok) plays the
// kubelets of Nodes that have none: it marks the Nodes it manages Ready, keeps
// them heart-beating when asked to, and runs the pods bound to them (Running,
// a pod IP, deleted when asked). Karpenter's KWOK provider creates such Nodes;
// fleet benchmarks create thousands. What KWOK does to an object is written in
// Stage documents, copied by `make tools` from KWOK's pinned module into
// bin/crds/kwok-stage-*/.

const (
	// KWOKNodeAnnotation is the annotation (key=value) of the Nodes KWOK
	// manages by default: every Node Karpenter's KWOK provider creates
	// carries it.
	KWOKNodeAnnotation = "kwok.x-k8s.io/node=fake"
	// KWOKPodCIDR is the range KWOK gives the pods on its Nodes addresses
	// from by default: outside ClusterNet, PodCIDR and the real nodes' links,
	// and routed nowhere (nothing connects to a KWOK pod).
	KWOKPodCIDR = "10.215.0.0/16"
)

// Directories of KWOK Stage documents under bin/crds, for KWOKOptions.Stages.
const (
	// KWOKStageNodeFast marks a managed Node Ready once, at once.
	KWOKStageNodeFast = "kwok-stage-node-fast"
	// KWOKStageNodeHeartbeat renews a managed Node's Lease and Ready
	// condition, as a kubelet's heartbeat does (for fleets whose
	// kube-controller-manager watches node health).
	KWOKStageNodeHeartbeat = "kwok-stage-node-heartbeat-with-lease"
	// KWOKStagePodFast makes a pod on a managed Node Ready, completes a
	// Job's, and removes a deleted one at once.
	KWOKStagePodFast = "kwok-stage-pod-fast"
)

// KWOKOptions shapes a KWOK controller.
type KWOKOptions struct {
	// Name names the process and its log (default "kwok"): two KWOKs on
	// one plane need two names.
	Name string
	// Stages are the directories under bin/crds whose Stage documents KWOK
	// applies (each *.yaml but kustomization.yaml); empty means
	// KWOKStageNodeFast and KWOKStagePodFast.
	Stages []string
	// NodeAnnotation selects the Nodes KWOK manages by annotation
	// (key=value); empty means KWOKNodeAnnotation unless NodeLabel is set.
	NodeAnnotation string
	// NodeLabel selects the Nodes KWOK manages by label instead (a label
	// selector, such as "type=kwok").
	NodeLabel string
	// CIDR is the range of the pod IPs KWOK hands out (default
	// KWOKPodCIDR); it must hold every pod of the run.
	CIDR string
	// Args are further flags of KWOK's (such as
	// --node-lease-duration-seconds=40 with KWOKStageNodeHeartbeat).
	Args []string
}

// StartKWOK runs KWOK against the plane as its admin, with the Stages of
// opts joined into one --config file. It is stopped with the plane (before
// kube-apiserver, like every controller), its log in cp.Dir/<name>.log and
// among cp.Logs. KWOK serves no readiness endpoint: a test waits for what it
// does (a Node it manages turning Ready).
func (cp *ControlPlane) StartKWOK(opts KWOKOptions) (*Process, error) {
	if opts.Name == "" {
		opts.Name = "kwok"
	}
	if len(opts.Stages) == 0 {
		opts.Stages = []string{KWOKStageNodeFast, KWOKStagePodFast}
	}
	if opts.CIDR == "" {
		opts.CIDR = KWOKPodCIDR
	}
	if opts.NodeAnnotation != "" && opts.NodeLabel != "" {
		return nil, errors.New("kwok: NodeAnnotation and NodeLabel are exclusive")
	}
	selector := "--manage-nodes-with-annotation-selector=" + KWOKNodeAnnotation
	switch {
	case opts.NodeLabel != "":
		selector = "--manage-nodes-with-label-selector=" + opts.NodeLabel
	case opts.NodeAnnotation != "":
		selector = "--manage-nodes-with-annotation-selector=" + opts.NodeAnnotation
	}
	config, err := cp.writeKWOKStages(opts.Name, opts.Stages)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--config=" + config,
		selector,
		"--cidr=" + opts.CIDR,
	}, opts.Args...)
	bin, err := LaterTool(context.Background(), cp.BinDir, "kwok")
	if err != nil {
		return nil, fmt.Errorf("kwok: %w", err)
	}
	p, err := StartProcess(cp.Dir, opts.Name, bin, args, nil)
	if err != nil {
		return nil, err
	}
	cp.addExtra(p)
	return p, nil
}

// writeKWOKStages joins the Stage documents of the stage directories into
// one multi-document file for KWOK's --config and returns its path.
func (cp *ControlPlane) writeKWOKStages(name string, stages []string) (string, error) {
	var docs []string
	for _, stage := range stages {
		dir := filepath.Join(cp.BinDir, "crds", stage)
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return "", err
		}
		n := 0
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				return "", fmt.Errorf("kwok stage %s: %w", stage, err)
			}
			docs = append(docs, strings.TrimSpace(string(b)))
			n++
		}
		if n == 0 {
			return "", fmt.Errorf("kwok: no Stage documents in %s: run make tools", dir)
		}
	}
	path := filepath.Join(cp.Dir, name+"-stages.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")+"\n"), 0o644)
}
