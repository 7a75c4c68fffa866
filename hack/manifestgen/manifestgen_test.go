package manifestgen

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const render = `---
# Source: kube-node-ready/templates/empty.yaml
---
# Source: kube-node-ready/templates/svc.yaml
# A comment that stays.
apiVersion: v1
kind: Service
metadata:
  name: svc
  namespace: ns
  labels:
    a: "1"
    a: "1"
spec:
  clusterIP: None
---
# Source: kube-node-ready/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: ns
data:
  k: v
`

func TestParse(t *testing.T) {
	objs, err := Parse(render)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want 2 (the empty document dropped)", len(objs))
	}
	svc, cm := objs[0], objs[1]
	if svc.Source != "templates/svc.yaml" || svc.Key() != "/Service ns/svc" {
		t.Errorf("service: source %q key %q", svc.Source, svc.Key())
	}
	// A repeated key is written the way helm reads it, comments kept, so
	// that kustomize's strict parser accepts it.
	var strict map[string]any
	if err := yaml.UnmarshalStrict([]byte(svc.Text), &strict); err != nil {
		t.Errorf("document with a repeated key still fails a strict parse: %v\n%s", err, svc.Text)
	}
	if !strings.HasPrefix(svc.Text, "# Source: kube-node-ready/templates/svc.yaml\n# A comment that stays.\n") {
		t.Errorf("leading comments lost:\n%s", svc.Text)
	}
	if !strings.HasPrefix(cm.Text, "# Source: kube-node-ready/templates/cm.yaml\napiVersion: v1\n") {
		t.Errorf("a clean document is not kept as helm wrote it:\n%s", cm.Text)
	}
}

func mustParse(t *testing.T, s string) []Object {
	t.Helper()
	objs, err := Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

const deployment = `# Source: c/templates/d.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
spec:
  template:
    spec:
      containers:
        - name: c
          args: [--a, --mode=x]
          volumeMounts:
            - {name: config, mountPath: /config}
      volumes:
        - {name: config, configMap: {name: cfg}}
`

const deploymentWithTLS = `# Source: c/templates/d.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  annotations: {x: "y"}
spec:
  template:
    spec:
      containers:
        - name: c
          args: [--a, --mode=files]
          volumeMounts:
            - {name: config, mountPath: /config}
            - {name: tls, mountPath: /tls}
      volumes:
        - {name: config, configMap: {name: cfg}}
        - {name: tls, secret: {secretName: tls}}
`

const crd = `# Source: c/templates/cr.yaml
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: ns
spec:
  size: 1
  colour: red
`

const crdChanged = `# Source: c/templates/cr.yaml
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: ns
spec:
  size: 2
`

const configMap = `# Source: c/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: extra
  namespace: ns
`

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name       string
		base, with string
		added      []string
		patches    map[string]string // file -> patch YAML
	}{
		{
			name: "unchanged",
			base: deployment, with: deployment,
		},
		{
			name: "added object",
			base: deployment, with: deployment + "---\n" + configMap,
			added: []string{"/ConfigMap ns/extra"},
		},
		{
			name: "removed object",
			base: deployment + "---\n" + configMap, with: deployment,
			patches: map[string]string{"configmap-extra.patch.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: ns\n$patch: delete\n"},
		},
		{
			// kustomize puts a patch's list elements first, so the patch
			// lists every element in order, the unchanged ones by key.
			name: "changed built-in kind: strategic merge patch in element order",
			base: deployment, with: deploymentWithTLS,
			patches: map[string]string{"deployment-d.patch.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: ns
  annotations:
    x: "y"
spec:
  template:
    spec:
      containers:
      - args:
        - --a
        - --mode=files
        name: c
        volumeMounts:
        - mountPath: /config
        - mountPath: /tls
          name: tls
      volumes:
      - name: config
      - name: tls
        secret:
          secretName: tls
`},
		},
		{
			name: "changed custom resource: JSON merge patch",
			base: crd, with: crdChanged,
			patches: map[string]string{"widget-w.patch.yaml": "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: ns\nspec:\n  colour: null\n  size: 2\n"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, patches, err := Diff(mustParse(t, tc.base), mustParse(t, tc.with))
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range added {
				keys = append(keys, o.Key())
			}
			if strings.Join(keys, ",") != strings.Join(tc.added, ",") {
				t.Errorf("added %v, want %v", keys, tc.added)
			}
			if len(patches) != len(tc.patches) {
				t.Fatalf("%d patches, want %d", len(patches), len(tc.patches))
			}
			for _, p := range patches {
				if want, ok := tc.patches[p.File]; !ok || string(p.YAML) != want {
					t.Errorf("patch %s:\n%s\nwant:\n%s", p.File, p.YAML, want)
				}
			}
		})
	}
}

func TestDiffRefusesDuplicates(t *testing.T) {
	objs := mustParse(t, configMap+"---\n"+configMap)
	if _, _, err := Diff(objs, objs); err == nil || !strings.Contains(err.Error(), "rendered twice") {
		t.Errorf("err = %v, want rendered twice", err)
	}
}

func TestOrderElementsRefusesWhatKustomizeDoesNotApply(t *testing.T) {
	p := map[string]any{"metadata": map[string]any{"$deleteFromPrimitiveList/finalizers": []any{"a"}}}
	if err := orderElements(p); err == nil || !strings.Contains(err.Error(), "$deleteFromPrimitiveList/finalizers") {
		t.Errorf("err = %v, want the directive named", err)
	}
}

func TestSplitHooks(t *testing.T) {
	hook := func(h string) Object {
		return Object{Obj: map[string]any{"kind": "Job", "metadata": map[string]any{"name": "j", "annotations": map[string]any{"helm.sh/hook": h}}}}
	}
	plain := Object{Obj: map[string]any{"kind": "Job", "metadata": map[string]any{"name": "p"}}}
	rest, hooks, err := splitHooks([]Object{plain, hook("pre-delete")})
	if err != nil || len(rest) != 1 || len(hooks) != 1 {
		t.Errorf("rest %d hooks %d err %v, want 1 1 nil", len(rest), len(hooks), err)
	}
	if _, _, err := splitHooks([]Object{hook("post-install")}); err == nil {
		t.Error("a post-install hook was accepted; plain manifests cannot run it")
	}
}
