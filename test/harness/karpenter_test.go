package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestNodePoolObject: the NodePool carries the options where Karpenter
// reads them, and no consolidation unless asked.
func TestNodePoolObject(t *testing.T) {
	np := nodePool(NodePoolOptions{
		Name:          "p",
		Labels:        map[string]string{"pool": "p"},
		Annotations:   map[string]string{"infra.894.io/protect": "true"},
		StartupTaints: []corev1.Taint{{Key: "node-ready/unverified", Value: "true", Effect: corev1.TaintEffectNoSchedule}},
	})
	get := func(path ...string) any {
		v, _, err := unstructured.NestedFieldNoCopy(np.Object, path...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := get("spec", "template", "metadata", "labels", "pool"); got != "p" {
		t.Errorf("template label = %v", got)
	}
	if got := get("spec", "template", "metadata", "annotations", "infra.894.io/protect"); got != "true" {
		t.Errorf("template annotation = %v", got)
	}
	st, _ := get("spec", "template", "spec", "startupTaints").([]any)
	if len(st) != 1 || st[0].(map[string]any)["key"] != "node-ready/unverified" || st[0].(map[string]any)["effect"] != "NoSchedule" {
		t.Errorf("startupTaints = %v", st)
	}
	if get("spec", "template", "spec", "taints") != nil {
		t.Error("taints set without any asked for")
	}
	if got := get("spec", "disruption", "consolidateAfter"); got != "Never" {
		t.Errorf("consolidateAfter = %v, want Never by default", got)
	}
	np = nodePool(NodePoolOptions{Name: "q", Consolidation: "WhenEmpty", ConsolidateAfter: 5 * time.Second})
	if got, _, _ := unstructured.NestedString(np.Object, "spec", "disruption", "consolidateAfter"); got != "5s" {
		t.Errorf("consolidateAfter = %v, want 5s", got)
	}
}

// TestKWOKStagesJoined: every Stage document of the directories, and not
// their kustomization.yaml, goes into KWOK's one --config file.
func TestKWOKStagesJoined(t *testing.T) {
	bin := t.TempDir()
	for dir, files := range map[string][]string{"a": {"one.yaml", "kustomization.yaml"}, "b": {"two.yaml"}} {
		if err := os.MkdirAll(filepath.Join(bin, "crds", dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(bin, "crds", dir, f), []byte("kind: "+f+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp := &ControlPlane{BinDir: bin, Dir: t.TempDir()}
	path, err := cp.writeKWOKStages("kwok", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "kind: one.yaml\n---\nkind: two.yaml\n"; got != want {
		t.Errorf("stages file = %q, want %q", got, want)
	}
	if _, err := cp.writeKWOKStages("kwok", []string{"missing"}); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("a missing stage directory: %v, want an error that says to run make tools", err)
	}
}
