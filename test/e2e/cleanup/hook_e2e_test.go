//go:build e2e

package cleanup

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/cleanup/plugins"
	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	ipHook   = "10.213.0.24"
	hookAddr = "10.213.0.33:8080"
)

// cmdb is a hook receiver: it refuses with 500 while down, records every
// document it accepts and the auth header it got.
type cmdb struct {
	mu   sync.Mutex
	down bool
	got  []plugins.HookDocument
	auth []string
	hits int
}

func (c *cmdb) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hits++
	if c.down {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var d plugins.HookDocument
	if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c.got = append(c.got, d)
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	w.WriteHeader(http.StatusAccepted)
}

func (c *cmdb) setDown(down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = down
}

func (c *cmdb) snapshot() (docs []plugins.HookDocument, auth []string, hits int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got), slices.Clone(c.auth), c.hits
}

// TestHookPlugin: a critical hook plugin POSTs the deleted node's document
// (name, UID, provider ID, zone, instance type, deletion time) with the auth
// header from its secret file; while the receiver fails, the node keeps its
// finalizer; once it accepts, the node goes.
func TestHookPlugin(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	rcv := &cmdb{down: true}
	serve(t, hookAddr, rcv)
	auth := writeFile(t, cp.Dir, "cmdb-auth", "Bearer cmdb-token\n")
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  hook:
    critical: true
    url: http://%s/api/nodes
    authHeaderFile: %s
    cluster: e2e
    retries: 1
`, hookAddr, auth))
	w := cp.StartWebhook(t, "webhook-hook", ipHook,
		"--kubeconfig="+webhookIdentity(t, cp), "--namespace="+ns, "--pod-name=webhook-hook",
		"--webhook-config-name=", "--extra-sans="+ipHook, "--config="+config,
		"--cleanup-retry-base=500ms", "--cleanup-retry-max=2s", "--log-level=debug")
	w.WaitReady(t, 30*time.Second)
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)

	const name = "hooked-1"
	e.createNode(t, name)
	n, err := cp.Client.CoreV1().Nodes().Patch(t.Context(), name, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"z1","node.kubernetes.io/instance-type":"m7g.large"}},"spec":{"providerID":"kind://e2e/hooked-1"}}`),
		metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	waitFor(t, 30*time.Second, "the hook retried against the failing receiver", func() bool {
		_, _, hits := rcv.snapshot()
		return hits >= 4
	})
	if got, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{}); err != nil || !slices.Contains(got.Finalizers, fin) {
		t.Fatalf("node %s while the critical hook fails: %v, want it kept with the finalizer", name, err)
	}
	rcv.setDown(false)
	e.waitGone(t, name, 30*time.Second)
	docs, auths, _ := rcv.snapshot()
	if len(docs) != 1 {
		t.Fatalf("%d documents accepted, want 1", len(docs))
	}
	d := docs[0]
	if d.Event != "NodeDeleted" || d.Cluster != "e2e" || d.Node.Name != name || d.Node.UID != string(n.UID) ||
		d.Node.ProviderID != "kind://e2e/hooked-1" || d.Node.Zone != "z1" || d.Node.InstanceType != "m7g.large" || d.Node.DeletionTimestamp == nil {
		t.Errorf("document = %+v, want node %s (uid %s) with provider ID, zone, instance type and deletion time", d, name, n.UID)
	}
	if auths[0] != "Bearer cmdb-token" {
		t.Errorf("Authorization = %q, want the secret file's value", auths[0])
	}
}
