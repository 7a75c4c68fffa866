//go:build e2e

package nrc

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

var rulesGVR = schema.GroupVersionResource{Group: "readiness.node.x-k8s.io", Version: "v1alpha1", Resource: "nodereadinessrules"}

// rule is what the tests read of a NodeReadinessRule.
type rule struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Conditions []struct {
			Type           string                 `json:"type"`
			RequiredStatus corev1.ConditionStatus `json:"requiredStatus"`
			DefaultStatus  corev1.ConditionStatus `json:"defaultStatus"`
		} `json:"conditions"`
		Taint           corev1.Taint `json:"taint"`
		EnforcementMode string       `json:"enforcementMode"`
	} `json:"spec"`
	// raw is the YAML as documented.
	raw string
}

// documentedRules are the rules docs/autoscalers.md shows, by the name of
// their marker (<!-- nodereadinessrule: NAME --> before a yaml block): the
// test applies what a reader copies.
func documentedRules(t *testing.T) map[string]rule {
	t.Helper()
	root, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "autoscalers.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- nodereadinessrule: ([a-z-]+) -->\n```yaml\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	rules := map[string]rule{}
	for _, b := range blocks {
		var r rule
		if err := yaml.Unmarshal([]byte(b[2]), &r); err != nil {
			t.Fatalf("docs/autoscalers.md, rule %s: %v", b[1], err)
		}
		r.raw = b[2]
		rules[b[1]] = r
	}
	if len(rules) != 2 || rules["one"].raw == "" || rules["per-check"].raw == "" {
		t.Fatalf("docs/autoscalers.md documents rules %v, want one and per-check", len(rules))
	}
	return rules
}

// createRule creates the rule written as YAML, removed when the test ends.
func createRule(t *testing.T, raw string) error {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(raw), &obj); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	client := dynamic.NewForConfigOrDie(cp.Config).Resource(rulesGVR)
	if _, err := client.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		return err
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	return nil
}

// TestDocumentedRulesAreAccepted: the CRD written from the controller's API
// accepts both rules docs/autoscalers.md tells the reader to write, and
// refuses the same rule keyed outside readiness.k8s.io/ (a rule cannot
// own a taint of ours outside it: publish mode removes those).
func TestDocumentedRulesAreAccepted(t *testing.T) {
	for name, r := range documentedRules(t) {
		t.Run(name, func(t *testing.T) {
			if err := createRule(t, r.raw); err != nil {
				t.Fatalf("the documented rule %s was refused: %v", name, err)
			}
			other := strings.Replace(r.raw, "name: "+r.Metadata.Name, "name: "+r.Metadata.Name+"-ca-key", 1)
			other = strings.Replace(other, "key: "+r.Spec.Taint.Key, "key: startup-taint.cluster-autoscaler.kubernetes.io/node-ready", 1)
			err := createRule(t, other)
			if err == nil || !strings.Contains(err.Error(), "readiness.k8s.io/") {
				t.Errorf("a rule keyed outside readiness.k8s.io/: %v, want refused by the CRD's key rule", err)
			}
		})
	}
}
