//go:build e2e

package cleanup

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-node-ready/kube-node-ready/internal/api"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup/plugins"
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
	keys []string
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
	c.keys = append(c.keys, r.Header.Get("X-Api-Key"))
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
	harness.ServeHTTP(t, hookAddr, rcv)
	auth := writeFile(t, cp.Dir, "cmdb-auth", "Bearer cmdb-token\n")
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  hook:
    critical: true
    url: http://%s/api/nodes
    authHeaderFile: %s
    cluster: e2e
    retries: 1
`, hookAddr, auth))
	w := startReplica(t, cp, "webhook-hook", ipHook, config,
		"--cleanup-retry-base=500ms", "--cleanup-retry-max=2s", "--log-level=debug")
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
	harness.WaitFor(t, 30*time.Second, "the hook retried against the failing receiver", func() bool {
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

const (
	ipRedirect     = "10.213.0.61"
	originAddr     = "10.213.0.62:8080" // the configured receivers (hook and chat), redirecting
	elsewhereAddr  = "10.213.0.63:8080" // where they redirect to
	ipSecrets      = "10.213.0.64"
	secretsKeyName = "cmdb-key"
)

// TestHookAndNotifyDoNotFollowRedirectsAway: the configured receivers answer
// every request with a 307 to another address. Neither the hook's POST (with
// a custom X-Api-Key auth header and the node document), nor the start
// message to the secret chat URL, nor their reachability probes reach that
// address: a critical hook fails the attempt saying it was redirected, and
// the node is held until the receiver itself accepts the document.
func TestHookAndNotifyDoNotFollowRedirectsAway(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	away := &elsewhere{}
	harness.ServeHTTP(t, elsewhereAddr, away)
	rcv, room := &cmdb{}, &chat{}
	mux := http.NewServeMux()
	mux.Handle("/api/nodes", rcv)
	mux.Handle("/services/", room)
	origin := &redirecting{on: true, target: "http://" + elsewhereAddr, next: mux}
	harness.ServeHTTP(t, originAddr, origin)
	key := writeFile(t, cp.Dir, "cmdb-key", "k-123\n")
	chatURL := writeFile(t, cp.Dir, "chat-url", "http://"+originAddr+"/services/T0/B0/SECRET\n")
	config := writeFile(t, cp.Dir, "config.yaml", fmt.Sprintf(`plugins:
  hook:
    critical: true
    url: http://%s/api/nodes
    authHeader: X-Api-Key
    authHeaderFile: %s
    retries: 0
  notify:
    critical: false
    urlFile: %s
    events: [start]
    retries: 0
`, originAddr, key, chatURL))
	w := startReplica(t, cp, "webhook-redirect", ipRedirect, config,
		"--cleanup-retry-base=500ms", "--cleanup-retry-max=2s")
	e := &env{cp: cp, dir: cp.Dir, procs: []*harness.Daemon{w}}
	e.leader(t)

	const name = "redirected-1"
	e.createNode(t, name)
	cp.KubectlT(t, "", "delete", "node", name, "--wait=false")
	e.waitEvent(t, name, api.EventCleanupFailed, "HTTP 307, a redirect, not followed")
	if got := away.got(); len(got) > 0 {
		t.Errorf("the other address got %d requests meant for the configured receivers: %q", len(got), got)
	}
	if n, err := cp.Client.CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{}); err != nil || !slices.Contains(n.Finalizers, fin) {
		t.Fatalf("node %s while its critical hook is redirected: %v, want it held with the finalizer", name, err)
	}

	origin.set(false)
	e.waitGone(t, name, 30*time.Second)
	rcv.mu.Lock()
	keys := slices.Clone(rcv.keys)
	rcv.mu.Unlock()
	if docs, auths, _ := rcv.snapshot(); len(docs) != 1 || docs[0].Node.Name != name {
		t.Errorf("the configured receiver got %d documents, want the one about %s", len(docs), name)
	} else if k := keys[0]; k != "k-123" || auths[0] != "" {
		t.Errorf("X-Api-Key = %q, Authorization = %q at the configured receiver, want the key and no Authorization", k, auths[0])
	}
	if got := away.got(); len(got) > 0 {
		t.Errorf("the other address got %d requests meant for the configured receivers: %q", len(got), got)
	}
}

// TestSecretFilesOutsideTheSecretsDirAreRefused: with --secrets-dir set, a
// configuration whose hook.authHeaderFile is elsewhere — a file beside the
// directory, a path leaving it with .., a symlink in it leading out — is
// invalid: the reload is refused (the previous configuration keeps running)
// with an error naming the plugin and key.
func TestSecretFilesOutsideTheSecretsDirAreRefused(t *testing.T) {
	cp := harness.StartT(t, harness.Options{NoDNS: true})
	dir := filepath.Join(cp.Dir, "secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	inside := writeFile(t, dir, secretsKeyName, "k-123\n")
	outside := writeFile(t, cp.Dir, "not-a-secret", "k-outside\n")
	if err := os.Symlink(outside, filepath.Join(dir, "link-out")); err != nil {
		t.Fatal(err)
	}
	hookConfig := func(authFile string) string {
		return fmt.Sprintf(`plugins:
  hook:
    url: http://%s/api/nodes
    authHeader: X-Api-Key
    authHeaderFile: %s
`, originAddr, authFile)
	}
	config := writeFile(t, cp.Dir, "config.yaml", hookConfig(inside))
	w := startReplica(t, cp, "webhook-secrets", ipSecrets, config, "--config-reload-interval=200ms",
		"--secrets-dir="+dir)
	e := &env{cp: cp, dir: cp.Dir, configPath: config, procs: []*harness.Daemon{w}}
	for _, tc := range []struct{ path, want string }{
		{outside, "is outside the secrets directory"},
		{dir + "/../not-a-secret", "must not contain .."},
		{filepath.Join(dir, "link-out"), "leads outside the secrets directory"},
	} {
		e.applyConfig(t, hookConfig(tc.path), false)
		if logLine(w.LogT(t), `configuration reload failed`, `hook.authHeaderFile: \"`+tc.path+`\" `+tc.want) < 0 {
			t.Errorf("no reload error naming hook.authHeaderFile %q: %s", tc.path, tc.want)
		}
	}
}
