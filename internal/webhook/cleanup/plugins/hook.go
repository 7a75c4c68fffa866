package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// HookName is the hook plugin's name.
const HookName = "hook"

// hook POSTs a JSON document describing the deleted node to a URL of the
// operator's (a CMDB, ServiceNow, a cloud API behind a small adapter), so
// systems that keep their own list of machines hear of the deletion before
// the Node object is gone. Critical or not is the pipeline's setting: a
// critical hook holds the node until the receiver accepts the document.
type hook struct {
	url       string
	healthURL string
	authName  string
	authFile  string
	secrets   secretFiles
	cluster   string
	accept    []int
	retries   uint64
	client    kubernetes.Interface
	http      *http.Client
	log       *slog.Logger
}

type hookSettings struct {
	// URL receives the POST.
	URL string `json:"url"`
	// AuthHeaderFile holds the value of the auth header (a secret, mounted
	// from a Secret), such as "Bearer …"; empty sends none.
	AuthHeaderFile string `json:"authHeaderFile"`
	// AuthHeader is the header that carries it.
	AuthHeader string `json:"authHeader"`
	// Cluster names the cluster in the document.
	Cluster string `json:"cluster"`
	// AcceptStatus lists the status codes that mean delivered; empty is any 2xx.
	AcceptStatus []int `json:"acceptStatus"`
	// Retries after the first POST, with exponential backoff.
	Retries *int `json:"retries"`
	// HealthURL, when set, is probed with GET (with the auth header) and
	// must answer 2xx; without it the probe only checks that url answers at all.
	HealthURL string `json:"healthURL"`
}

// HookDocument is the JSON body the hook plugin sends.
type HookDocument struct {
	// Event is always "NodeDeleted".
	Event string `json:"event"`
	// Cluster is the configured cluster name.
	Cluster string `json:"cluster,omitempty"`
	// Node describes the node.
	Node HookNode `json:"node"`
}

// HookNode is the node as the hook document describes it.
type HookNode struct {
	Name              string            `json:"name"`
	UID               string            `json:"uid"`
	ProviderID        string            `json:"providerID,omitempty"`
	Zone              string            `json:"zone,omitempty"`
	InstanceType      string            `json:"instanceType,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp,omitempty"`
}

func newHook(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	s := hookSettings{AuthHeader: "Authorization"}
	secrets := secretFiles{dir: deps.SecretsDir}
	if err := cleanup.DecodeSettings(HookName, settings, &s); err != nil {
		return nil, err
	}
	u, err := url.Parse(s.URL)
	switch {
	case s.URL == "":
		return nil, fmt.Errorf("%s.url: required", HookName)
	case err != nil:
		return nil, fmt.Errorf("%s.url: %v", HookName, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("%s.url: %q is not an http(s) URL with a host", HookName, s.URL)
	}
	if s.AuthHeaderFile != "" {
		if _, err := secrets.read(HookName, "authHeaderFile", s.AuthHeaderFile); err != nil {
			return nil, err
		}
		if s.AuthHeader == "" {
			return nil, fmt.Errorf("%s.authHeader: must not be empty when authHeaderFile is set", HookName)
		}
	}
	for i, c := range s.AcceptStatus {
		if c < 100 || c > 599 {
			return nil, fmt.Errorf("%s.acceptStatus[%d]: %d is not an HTTP status code", HookName, i, c)
		}
	}
	retries, err := parseRetries(HookName, s.Retries)
	if err != nil {
		return nil, err
	}
	if err := checkHealthURL(HookName, s.HealthURL); err != nil {
		return nil, err
	}
	return &hook{url: s.URL, healthURL: s.HealthURL, authName: s.AuthHeader, authFile: s.AuthHeaderFile, secrets: secrets, cluster: s.Cluster,
		accept: s.AcceptStatus, retries: retries, client: deps.Client, http: noRedirectsAway(deps.HTTP), log: deps.Log}, nil
}

func (p *hook) Name() string { return HookName }

// Health probes the receiver: healthURL (2xx) if set, else url (any
// answer). The auth header goes only to url's host, never to another.
func (p *hook) Health(ctx context.Context) error {
	header := http.Header{}
	if p.authFile != "" && (p.healthURL == "" || sameHost(p.healthURL, p.url)) {
		auth, err := p.secrets.read(HookName, "authHeaderFile", p.authFile)
		if err != nil {
			return err
		}
		header.Set(p.authName, auth)
	}
	if p.healthURL != "" {
		return probeHTTP(ctx, p.http, p.healthURL, redactedURL(p.healthURL), header, true)
	}
	return probeHTTP(ctx, p.http, p.url, redactedURL(p.url), header, false)
}

func (p *hook) ShouldRun(*corev1.Node) bool { return true }

// Document describes node for the receiver.
func (p *hook) Document(node *corev1.Node) HookDocument {
	d := HookDocument{Event: "NodeDeleted", Cluster: p.cluster, Node: HookNode{
		Name: node.Name, UID: string(node.UID), ProviderID: node.Spec.ProviderID,
		Zone: node.Labels[corev1.LabelTopologyZone], InstanceType: node.Labels[corev1.LabelInstanceTypeStable],
		Labels: node.Labels, CreationTimestamp: node.CreationTimestamp.UTC(),
	}}
	if node.DeletionTimestamp != nil {
		t := node.DeletionTimestamp.UTC()
		d.Node.DeletionTimestamp = &t
	}
	return d
}

// Cleanup posts the document until the receiver accepts it.
func (p *hook) Cleanup(ctx context.Context, node *corev1.Node) error {
	node = p.withSpec(ctx, node)
	body, err := json.Marshal(p.Document(node))
	if err != nil {
		return err
	}
	if cleanup.DryRun(ctx) {
		p.log.Info("dry run: would post the node to the hook", "node", node.Name, "body", string(body))
		return nil
	}
	auth := ""
	if p.authFile != "" {
		// Read at every attempt: a rotated Secret is picked up without a restart.
		if auth, err = p.secrets.read(HookName, "authHeaderFile", p.authFile); err != nil {
			return err
		}
	}
	header := http.Header{}
	if auth != "" {
		header.Set(p.authName, auth)
	}
	post := jsonPost{url: p.url, name: redactedURL(p.url), header: header, retries: p.retries, accepted: p.accepted}
	if err := postJSON(ctx, p.http, post, body); err != nil {
		return fmt.Errorf("hook: %w", err)
	}
	return nil
}

// withSpec fills in the node's spec (the provider ID), which the watcher's
// metadata-only cache does not hold, from the Node the finalizer still keeps;
// a Node already gone or replaced leaves the document without it.
func (p *hook) withSpec(ctx context.Context, node *corev1.Node) *corev1.Node {
	if node.Spec.ProviderID != "" || p.client == nil {
		return node
	}
	cur, err := p.client.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	if err != nil || cur.UID != node.UID {
		return node
	}
	out := node.DeepCopy()
	out.Spec.ProviderID = cur.Spec.ProviderID
	return out
}

// accepted says whether code means delivered: any 2xx unless acceptStatus says.
func (p *hook) accepted(code int) bool {
	if len(p.accept) == 0 {
		return code/100 == 2
	}
	return slices.Contains(p.accept, code)
}

// redactedURL keeps the scheme, host and path of a URL for messages: a
// query may carry a token.
// sameHost reports whether two URLs name the same scheme, host and port.
func sameHost(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the hook URL"
	}
	return u.Scheme + "://" + u.Host + u.Path
}
