//go:build e2e

package kustomize_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/kube-node-ready/kube-node-ready/test/harness"
)

const (
	// release and namespace are what manifests/ is rendered as.
	release   = "kube-node-ready"
	namespace = "kube-node-ready"
	finalizer = "infra.894.io/node-cleanup"
)

// option is a component and the chart values it stands for.
type option struct {
	name string
	set  []string
}

// options are the chart values behind each component, written here rather
// than taken from the generator, so a component that drifts from the values
// it stands for fails.
var options = []option{
	{"monitoring", []string{"monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true", "monitoring.grafanaDashboard.enabled=true"}},
	{"cert-manager", []string{"webhook.certificates.mode=cert-manager"}},
	{"network-policy", []string{"networkPolicy.enabled=true"}},
}

var (
	cp        *harness.ControlPlane
	manifests string
	chart     string
	root      string
)

// object is a parsed Kubernetes object.
type object = map[string]any

// key identifies an object: group/kind namespace/name.
func key(o object) string {
	api, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	meta, _ := o["metadata"].(map[string]any)
	gv, _ := schema.ParseGroupVersion(api)
	return fmt.Sprintf("%s/%s %v/%v", gv.Group, kind, meta["namespace"], meta["name"])
}

// parse reads a YAML stream the way kubectl and helm do (a repeated key
// keeps its last value) and drops empty documents.
func parse(t *testing.T, stream []byte) []object {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("parse %s: %v", doc, err)
		}
		if len(o) > 0 {
			objs = append(objs, o)
		}
	}
}

// run runs a tool from bin/ and returns its standard output.
func run(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(cp.BinDir, tool), args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// kustomize builds dir with the real `kubectl kustomize`.
func kustomize(t *testing.T, dir string) []object {
	t.Helper()
	return parse(t, run(t, "kubectl", "kustomize", dir))
}

// helmTemplate renders the chart with set, as manifests/ is rendered, and
// splits off the objects of Helm hooks.
func helmTemplate(t *testing.T, set ...string) (objs, hooks []object) {
	t.Helper()
	args := []string{"template", release, chart, "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	for _, o := range parse(t, run(t, "helm", args...)) {
		meta, _ := o["metadata"].(map[string]any)
		annotations, _ := meta["annotations"].(map[string]any)
		if _, ok := annotations["helm.sh/hook"]; ok {
			hooks = append(hooks, o)
		} else {
			objs = append(objs, o)
		}
	}
	return objs, hooks
}

// installed is what an install with set holds: the chart's objects but its
// hooks, and the Namespace `helm install --create-namespace` would create.
func installed(t *testing.T, set ...string) []object {
	t.Helper()
	objs, _ := helmTemplate(t, set...)
	ns := object{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": namespace}}
	return append(objs, ns)
}

// sameObjects fails the test unless got and want hold the same objects,
// each equal as parsed (the order of the objects does not matter, the order
// inside them does).
func sameObjects(t *testing.T, what string, got, want []object) {
	t.Helper()
	index := func(objs []object) map[string]object {
		m := map[string]object{}
		for _, o := range objs {
			if _, dup := m[key(o)]; dup {
				t.Errorf("%s: %s twice", what, key(o))
			}
			m[key(o)] = o
		}
		return m
	}
	g, w := index(got), index(want)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o, ok := g[k]
		if !ok {
			t.Errorf("%s: %s missing", what, k)
			continue
		}
		if p, same := firstDifference(w[k], o, ""); !same {
			t.Errorf("%s: %s differs from the chart at %s", what, k, p)
		}
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			t.Errorf("%s: %s is not in the chart's render", what, k)
		}
	}
	if len(want) == 0 {
		t.Errorf("%s: the chart rendered nothing to compare with", what)
	}
}

// firstDifference compares want and got exactly and names the first path
// where they differ.
func firstDifference(want, got any, path string) (string, bool) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for _, k := range sortedKeys(w, g) {
			if p, same := firstDifference(w[k], g[k], path+"."+k); !same {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path, false
		}
		for i := range w {
			if p, same := firstDifference(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !same {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(want, got)
	}
}

func sortedKeys(ms ...map[string]any) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// relDir is dir relative to from: kustomize refuses absolute paths.
func relDir(t *testing.T, from, dir string) string {
	t.Helper()
	rel, err := filepath.Rel(from, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// userKustomization writes a kustomization of the base and components, as
// a user keeps next to their cluster's configuration, and returns its
// directory.
func userKustomization(t *testing.T, components []string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\n", relDir(t, dir, filepath.Join(manifests, "base")))
	if len(components) > 0 {
		b.WriteString("components:\n")
		for _, c := range components {
			fmt.Fprintf(&b, "  - %s\n", relDir(t, dir, filepath.Join(manifests, "components", c)))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKustomizeBuildEqualsHelmTemplate: the base, each overlay, every mix of
// the components, the uninstall kustomization and kube-node-ready.yaml hold
// exactly the objects helm template renders with the same values.
func TestKustomizeBuildEqualsHelmTemplate(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(manifests, "components"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs, names []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
	}
	for _, o := range options {
		names = append(names, o.name)
	}
	slices.Sort(names)
	if !slices.Equal(dirs, names) {
		t.Fatalf("manifests/components holds %v, this test knows the chart values of %v", dirs, names)
	}

	t.Run("base", func(t *testing.T) {
		sameObjects(t, "manifests/base", kustomize(t, filepath.Join(manifests, "base")), installed(t))
	})
	t.Run("kube-node-ready.yaml", func(t *testing.T) {
		flat, err := os.ReadFile(filepath.Join(manifests, "kube-node-ready.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		sameObjects(t, "manifests/kube-node-ready.yaml", parse(t, flat), installed(t))
	})
	for _, o := range options {
		t.Run("overlay "+o.name, func(t *testing.T) {
			dir := filepath.Join(manifests, "overlays", o.name)
			sameObjects(t, "manifests/overlays/"+o.name, kustomize(t, dir), installed(t, o.set...))
		})
	}
	// Every combination of two or more components (one is an overlay).
	for mask := 1; mask < 1<<len(options); mask++ {
		var comps, set []string
		for i, o := range options {
			if mask&(1<<i) != 0 {
				comps = append(comps, o.name)
				set = append(set, o.set...)
			}
		}
		if len(comps) < 2 {
			continue
		}
		t.Run("components "+strings.Join(comps, "+"), func(t *testing.T) {
			sameObjects(t, "base with components "+strings.Join(comps, ", "), kustomize(t, userKustomization(t, comps)), installed(t, set...))
		})
	}
	t.Run("uninstall", func(t *testing.T) {
		_, hooks := helmTemplate(t)
		sameObjects(t, "manifests/uninstall", kustomize(t, filepath.Join(manifests, "uninstall")), hooks)
	})
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			dir, set := docExample(t, ex.file, ex.heading)
			sameObjects(t, ex.name, kustomize(t, dir), installed(t, append(set, ex.set...)...))
		})
	}
}

// examples are the kustomizations the documentation shows; each must build
// what helm renders with the values its components and images: stand for,
// plus set for what its patches change.
var examples = []struct {
	name, file, heading string
	set                 []string
}{
	{name: "docs/install.md example", file: "docs/install.md", heading: "## Install with kustomize"},
	{
		name: "manifests/README own issuer", file: "manifests/README.md", heading: "## cert-manager with an issuer of your own",
		set: []string{"webhook.certificates.certManagerIssuer.kind=ClusterIssuer", "webhook.certificates.certManagerIssuer.name=my-ca"},
	},
}

// The examples refer to the repository on GitHub; here it is this working
// tree.
var remoteManifests = regexp.MustCompile(`https://github\.com/kube-node-ready/kube-node-ready//manifests/([a-z/-]+)\?ref=[^\s]+`)

// imageValues are the chart values of the two images kustomize's images:
// can override.
var imageValues = map[string]string{
	"ghcr.io/kube-node-ready/kube-node-ready-agent":   "agent.image",
	"ghcr.io/kube-node-ready/kube-node-ready-webhook": "webhook.image",
}

// docExample writes the first kustomization shown (as a yaml block) under
// heading in file, pointing at this tree instead of GitHub, and returns its
// directory and the chart values its components and images: stand for.
func docExample(t *testing.T, file, heading string) (string, []string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no %q section", file, heading)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatalf("%s %q shows no yaml block", file, heading)
	}
	block, _, _ = strings.Cut(block, "```")
	dir := t.TempDir()
	example := remoteManifests.ReplaceAllStringFunc(block, func(url string) string {
		sub := remoteManifests.FindStringSubmatch(url)[1]
		return relDir(t, dir, filepath.Join(manifests, filepath.FromSlash(sub)))
	})
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Components []string `json:"components"`
		Patches    []any    `json:"patches"`
		Images     []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.UnmarshalStrict([]byte(example), &k); err != nil {
		t.Fatalf("%s example: %v\n%s", file, err, example)
	}
	if k.Kind != "Kustomization" || len(k.Resources) != 1 || !strings.HasSuffix(k.Resources[0], "manifests/base") {
		t.Fatalf("%s example is not a Kustomization of the base:\n%s", file, example)
	}
	var set []string
	for _, c := range k.Components {
		i := slices.IndexFunc(options, func(o option) bool {
			return strings.HasSuffix(c, "manifests/components/"+o.name)
		})
		if i < 0 {
			t.Fatalf("%s example lists component %s, not one of manifests/components", file, c)
		}
		set = append(set, options[i].set...)
	}
	for _, img := range k.Images {
		value, ok := imageValues[img.Name]
		if !ok {
			t.Fatalf("%s example overrides image %s, which the chart does not use", file, img.Name)
		}
		if img.NewName != "" {
			set = append(set, value+".repository="+img.NewName)
		}
		if img.NewTag != "" {
			set = append(set, value+".tag="+img.NewTag)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, set
}

// live reads objects back from the API server.
type live struct {
	mapper *restmapper.DeferredDiscoveryRESTMapper
	client dynamic.Interface
}

func newLive(t *testing.T) live {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	client, err := dynamic.NewForConfig(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	return live{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), client: client}
}

// get reads o's live version with a GET to the API server.
func (l live) get(ctx context.Context, o object) (object, error) {
	api, _ := o["apiVersion"].(string)
	kind, _ := o["kind"].(string)
	gv, err := schema.ParseGroupVersion(api)
	if err != nil {
		return nil, err
	}
	mapping, err := l.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return nil, err
	}
	meta, _ := o["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	var r dynamic.ResourceInterface = l.client.Resource(mapping.Resource)
	if ns != "" {
		r = l.client.Resource(mapping.Resource).Namespace(ns)
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

// normalize gives numbers one type, as JSON decoding does.
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// stored names the first field of applied that the live object does not
// hold with the same value; the API server may add defaults, nothing else.
func stored(applied, live any, path string) (string, bool) {
	switch a := applied.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return path, false
		}
		for _, k := range sortedKeys(a) {
			if _, ok := l[k]; !ok && isZero(a[k]) {
				// Go types drop a false, 0 or "" field (omitempty): the default.
				continue
			}
			if p, ok := stored(a[k], l[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(a) {
			return path, false
		}
		for i := range a {
			if p, ok := stored(a[i], l[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	default:
		return path, reflect.DeepEqual(applied, live)
	}
}

func isZero(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == ""
	}
	return false
}

// identityOnly says whether o names an object and sets nothing in it (such
// as a bare Namespace): server-side apply records no fields for it.
func identityOnly(o object) bool {
	for k, v := range o {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			for mk := range v.(map[string]any) {
				if mk != "name" && mk != "namespace" {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// appliedByKubectl says whether kubectl server-side applied the object.
func appliedByKubectl(o object) bool {
	meta, _ := o["metadata"].(map[string]any)
	fields, _ := meta["managedFields"].([]any)
	for _, f := range fields {
		m, _ := f.(map[string]any)
		if m["manager"] == "kubectl" && m["operation"] == "Apply" {
			return true
		}
	}
	return false
}

// applyAndCheck applies dir as a user would (`kubectl apply --server-side
// -k`), then reads every object it builds back from the API server: each is
// there, owned by kubectl's apply, with every field as applied; and
// `kubectl diff --server-side -k` has nothing left to change.
func applyAndCheck(t *testing.T, dir string) {
	t.Helper()
	objs := kustomize(t, dir)
	cp.KubectlT(t, "", "apply", "--server-side", "-k", dir)
	l := newLive(t)
	for _, o := range objs {
		got, err := l.get(t.Context(), o)
		if err != nil {
			t.Errorf("%s after apply: %v", key(o), err)
			continue
		}
		if !identityOnly(o) && !appliedByKubectl(got) {
			t.Errorf("%s: no kubectl server-side apply in its managedFields", key(o))
		}
		if p, ok := stored(normalize(t, o), normalize(t, got), ""); !ok {
			t.Errorf("%s: the API server holds something else at %s than was applied", key(o), p)
		}
	}
	if out, err := cp.Kubectl(t.Context(), nil, "diff", "--server-side", "-k", dir); err != nil || out != "" {
		t.Errorf("kubectl diff --server-side -k after apply: %v\n%s", err, out)
	}
}

// TestKustomizeApplyServerSide applies the base, each overlay, all
// components together and the documentation's examples to the real API
// server, one after the other as a user changing their mind would.
func TestKustomizeApplyServerSide(t *testing.T) {
	t.Run("base", func(t *testing.T) { applyAndCheck(t, filepath.Join(manifests, "base")) })
	for _, o := range options {
		t.Run("overlay "+o.name, func(t *testing.T) { applyAndCheck(t, filepath.Join(manifests, "overlays", o.name)) })
	}
	t.Run("all components", func(t *testing.T) {
		var all []string
		for _, o := range options {
			all = append(all, o.name)
		}
		applyAndCheck(t, userKustomization(t, all))
	})
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			dir, _ := docExample(t, ex.file, ex.heading)
			applyAndCheck(t, dir)
		})
	}
}

// TestKustomizeUninstallLeavesNoFinalizer follows the uninstall manifests/
// documents: apply manifests/uninstall, let its Job run, delete it. The Job
// (run here as its container would run: the real webhook binary with its
// args, under its ServiceAccount's token, since the harness runs no job
// controller) deletes the webhook configuration and strips our finalizer
// from every node, keeping other finalizers.
func TestKustomizeUninstallLeavesNoFinalizer(t *testing.T) {
	ctx := t.Context()
	applyAndCheck(t, filepath.Join(manifests, "base"))
	webhookConfig := release + "-webhook"
	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{}); err != nil {
		t.Fatalf("webhook configuration after install: %v", err)
	}
	var nodes []string
	for i := range 3 {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kustomize-%d", i), Finalizers: []string{finalizer, "example.com/keep"}}}
		if _, err := cp.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.Name)
	}

	uninstall := filepath.Join(manifests, "uninstall")
	applyAndCheck(t, uninstall)
	job, err := cp.Client.BatchV1().Jobs(namespace).Get(ctx, release+"-uninstall", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := cp.CreateNode(ctx, "kustomize-job-runner", harness.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := job.Spec.Template.Spec
	token, err := cp.NodeToken(ctx, namespace, spec.ServiceAccountName, runner.Name)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := cp.WriteKubeconfig("kustomize-uninstall", spec.ServiceAccountName, token)
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(spec.Containers[0].Args), "--kubeconfig="+kubeconfig)
	if out, err := exec.CommandContext(ctx, filepath.Join(cp.BinDir, "kube-node-ready-webhook"), args...).CombinedOutput(); err != nil {
		t.Fatalf("uninstall job %v: %v\n%s", args, err, out)
	}

	if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, webhookConfig, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("webhook configuration after the uninstall job: %v, want NotFound", err)
	}
	for _, name := range nodes {
		n, err := cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(n.Finalizers, []string{"example.com/keep"}) {
			t.Errorf("node %s finalizers = %v, want only the foreign one kept", name, n.Finalizers)
		}
	}
	cp.KubectlT(t, "", "delete", "-k", uninstall)
	if _, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, release+"-uninstall", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("uninstall ClusterRole after kubectl delete -k: %v, want NotFound", err)
	}
}
