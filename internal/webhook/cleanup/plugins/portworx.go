package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-node-ready/kube-node-ready/internal/eventnote"
	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// PortworxName is the portworx plugin's name.
const PortworxName = "portworx"

// portworx decommissions the node from the Portworx cluster over the
// OpenStorage cluster REST API Portworx serves: it finds the Portworx node
// whose scheduler node name (or hostname) is this node's name with
// GET /v1/cluster/enumerate, then removes it with DELETE /v1/cluster/{id}.
// A node Portworx does not know, or a 404 on removal, is success. Like the
// storage plugins it acts for the deleted Node's incarnation only (see
// owner): Portworx knows a node by name, not by the Node's UID.
type portworx struct {
	client      kubernetes.Interface
	endpoint    *url.URL
	tokenFile   string
	secrets     secretFiles
	forceRemove bool
	http        *http.Client
	log         *slog.Logger
}

type portworxSettings struct {
	// Endpoint is the base URL of the REST API, e.g. http://portworx-api.kube-system:9001.
	Endpoint string `json:"endpoint"`
	// TokenFile holds a bearer token (mounted from a Secret); optional.
	TokenFile string `json:"tokenFile"`
	// ForceRemove asks Portworx to remove the node even if it holds data.
	ForceRemove bool `json:"forceRemove"`
}

func newPortworx(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	var s portworxSettings
	secrets := secretFiles{dir: deps.SecretsDir}
	if err := cleanup.DecodeSettings(PortworxName, settings, &s); err != nil {
		return nil, err
	}
	u, err := url.Parse(s.Endpoint)
	if s.Endpoint == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s.endpoint: want an http(s) URL like http://portworx-api.kube-system:9001, got %q", PortworxName, s.Endpoint)
	}
	if s.TokenFile != "" {
		if _, err := secrets.read(PortworxName, "tokenFile", s.TokenFile); err != nil {
			return nil, err
		}
	}
	return &portworx{client: deps.Client, endpoint: u, tokenFile: s.TokenFile, secrets: secrets, forceRemove: s.ForceRemove, http: noRedirectsAway(deps.HTTP), log: deps.Log}, nil
}

func (p *portworx) Name() string { return PortworxName }

// Health asks the API for the cluster's nodes, as a cleanup would first.
func (p *portworx) Health(ctx context.Context) error {
	status, body, err := p.do(ctx, http.MethodGet, "/v1/cluster/enumerate")
	if err != nil {
		return err
	}
	if status/100 != 2 {
		return fmt.Errorf("portworx: GET /v1/cluster/enumerate: %s %s", statusText(status), snippet(body))
	}
	return nil
}

func (p *portworx) ShouldRun(*corev1.Node) bool { return true }

func (p *portworx) Cleanup(ctx context.Context, node *corev1.Node) error {
	if cleanup.DryRun(ctx) {
		p.log.Info("dry run: would decommission the node from portworx", "node", node.Name, "endpoint", p.endpoint.Redacted())
		return nil
	}
	px, err := p.find(ctx, node)
	if err != nil {
		return err
	}
	if px == nil {
		p.log.Info("node not in the portworx cluster; nothing to decommission", "node", node.Name)
		return nil
	}
	if skip, err := p.owner(ctx, node, px); err != nil || skip != nil {
		if skip != nil {
			return skip
		}
		return err
	}
	id := px.ID
	q := url.Values{"forceRemove": {strconv.FormatBool(p.forceRemove)}}
	status, body, err := p.do(ctx, http.MethodDelete, "/v1/cluster/"+url.PathEscape(id)+"?"+q.Encode())
	switch {
	case err != nil:
		return err
	case status == http.StatusNotFound:
		p.log.Info("portworx node already removed", "node", node.Name, "portworx_node_id", id)
		return nil
	case status/100 != 2:
		return fmt.Errorf("portworx: remove node %s (id %s): %s: %s", node.Name, id, statusText(status), snippet(body))
	}
	p.log.Info("node decommissioned from portworx", "node", node.Name, "portworx_node_id", id)
	return nil
}

// pxNode accepts both the protobuf JSON names and Go field names.
type pxNode struct {
	ID                 string `json:"id"`
	Hostname           string `json:"hostname"`
	SchedulerNodeName  string `json:"scheduler_node_name"`
	SchedulerNodeName2 string `json:"schedulerNodeName"`
	// byHostname: matched by Hostname, Portworx naming no scheduler node.
	byHostname bool
}

// find returns the Portworx node of node, or nil when Portworx does not know it.
func (p *portworx) find(ctx context.Context, node *corev1.Node) (*pxNode, error) {
	status, body, err := p.do(ctx, http.MethodGet, "/v1/cluster/enumerate")
	if err != nil {
		return nil, err
	}
	if status/100 != 2 {
		return nil, fmt.Errorf("portworx: enumerate cluster: %s: %s", statusText(status), snippet(body))
	}
	var cluster struct {
		Nodes []pxNode `json:"nodes"`
	}
	if err := json.Unmarshal(body, &cluster); err != nil {
		return nil, fmt.Errorf("portworx: enumerate cluster: answer is not the expected JSON (%v): %s", err, snippet(body))
	}
	hostname := node.Labels[corev1.LabelHostname]
	for _, n := range cluster.Nodes {
		sched := n.SchedulerNodeName
		if sched == "" {
			sched = n.SchedulerNodeName2
		}
		if sched == node.Name || (sched == "" && (n.Hostname == node.Name || (hostname != "" && n.Hostname == hostname))) {
			if n.ID == "" {
				return nil, fmt.Errorf("portworx: node %s has no id in the enumerate answer", node.Name)
			}
			n.byHostname = sched == ""
			return &n, nil
		}
	}
	return nil, nil
}

// owner says whether px is still the deleted node's, read from the API
// server after the enumerate: a Portworx node runs on a Node that existed
// before it, so one that belongs to a Node re-created since under the same
// name shows that Node here. It is not the deleted node's, and is left alone
// (a cleanup.Skip with the reason), when the Node of that name now has
// another UID, or when px was matched by hostname alone and another live
// Node (not being deleted) carries that hostname. A Node already gone is
// the deleted one, as for the storage plugins (stillSameNode).
func (p *portworx) owner(ctx context.Context, node *corev1.Node, px *pxNode) (*cleanup.Skip, error) {
	same, err := stillSameNode(ctx, p.client, node)
	if err != nil {
		return nil, fmt.Errorf("portworx: %w", err)
	}
	if !same {
		p.log.Info("node was re-created under the same name; leaving its portworx node alone", "node", node.Name, "portworx_node_id", px.ID)
		return &cleanup.Skip{Reason: fmt.Sprintf("left portworx node %s alone: node %s was re-created under the same name, and the portworx node of that name is the new node's", px.ID, node.Name)}, nil
	}
	if !px.byHostname || len(validation.IsValidLabelValue(px.Hostname)) > 0 {
		return nil, nil
	}
	nodes, err := p.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromValidatedSet(labels.Set{corev1.LabelHostname: px.Hostname}).String()})
	if err != nil {
		return nil, fmt.Errorf("portworx: list nodes with hostname %s: %w", px.Hostname, err)
	}
	var live []string
	for _, n := range nodes.Items {
		if n.UID != node.UID && n.DeletionTimestamp == nil {
			live = append(live, n.Name)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	p.log.Warn("portworx node left alone: it names no scheduler node, and another live node carries its hostname",
		"node", node.Name, "portworx_node_id", px.ID, "hostname", px.Hostname, "live_nodes", live)
	return &cleanup.Skip{Reason: fmt.Sprintf("left portworx node %s alone: it names no scheduler node, and its hostname %s is also live node %s's",
		px.ID, px.Hostname, strings.Join(live, ", "))}, nil
}

func (p *portworx) do(ctx context.Context, method, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(p.endpoint.String(), "/")+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("portworx: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if p.tokenFile != "" {
		tok, err := p.secrets.read(PortworxName, "tokenFile", p.tokenFile)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("portworx: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("portworx: %s %s: read answer: %w", method, path, err)
	}
	return resp.StatusCode, body, nil
}

func snippet(b []byte) string {
	return strconv.Quote(eventnote.Cut(strings.TrimSpace(string(b)), 200))
}
