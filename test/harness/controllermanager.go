package harness

import (
	"path/filepath"
	"strings"
)

// StartControllerManager runs kube-controller-manager against a control
// plane without real nodes (as its admin), with only the named controllers
// (its --controllers, such as "deployment", "replicaset", "disruption"): a
// test that needs Deployments to make pods, or PodDisruptionBudgets to have
// a status the Eviction API can judge, turns on those and nothing else. The
// node lifecycle controller in particular stays off: it would mark KWOK's
// and the simulated Nodes, which send no heartbeat, NotReady and evict their
// pods. No serving port, no leader election; it is stopped with the plane.
func (cp *ControlPlane) StartControllerManager(controllers ...string) (*Process, error) {
	p, err := StartProcess(cp.Dir, "kube-controller-manager", filepath.Join(cp.BinDir, "kube-controller-manager"), []string{
		"--kubeconfig=" + cp.Kubeconfig,
		"--secure-port=0",
		"--leader-elect=false",
		"--controllers=" + strings.Join(controllers, ","),
		"--v=1",
	}, nil)
	if err != nil {
		return nil, err
	}
	cp.addExtra(p)
	return p, nil
}
