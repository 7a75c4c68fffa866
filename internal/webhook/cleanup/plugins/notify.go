package plugins

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-node-ready/kube-node-ready/internal/webhook/cleanup"
)

// NotifyName is the notify plugin's name.
const NotifyName = "notify"

// Notification kinds, also the values of the `events` key.
const (
	NotifyStart   = "start"
	NotifySuccess = "success"
	NotifyFailure = "failure"
)

// notify POSTs a chat message (Slack or Microsoft Teams incoming-webhook
// JSON) when a node's cleanup starts, completes and fails. Cleanup sends the
// start message on every attempt until one was delivered for that node (by
// UID): a critical notify plugin holds the node until the receiver has it.
// Success and failure are sent when the attempt ends; failures on attempts
// 1, 2, 4, 8, … so a stuck node does not flood the channel. Each POST is
// retried with exponential backoff.
type notify struct {
	urlFile   string
	secrets   secretFiles
	healthURL string
	format    string
	events    []string
	cluster   string
	retries   uint64
	http      *http.Client
	log       *slog.Logger

	mu sync.Mutex
	// started holds the nodes whose start message was delivered, and when,
	// so later attempts do not repeat it; entries go with the node's success
	// or after startedTTL.
	started map[types.UID]time.Time
}

// startedTTL bounds how long a delivered start message is remembered for a
// node whose cleanup never finishes here (bypassed, or led elsewhere).
const startedTTL = 24 * time.Hour

type notifySettings struct {
	// URLFile holds the incoming-webhook URL (a secret, mounted from a Secret).
	URLFile string `json:"urlFile"`
	// Format is slack or teams.
	Format string `json:"format"`
	// Events picks from start, success, failure.
	Events []string `json:"events"`
	// Cluster names the cluster in messages.
	Cluster string `json:"cluster"`
	// Retries after the first POST.
	Retries *int `json:"retries"`
	// HealthURL, when set, is probed with GET and must answer 2xx; without
	// it the probe only checks that the webhook URL answers at all.
	HealthURL string `json:"healthURL"`
}

func newNotify(deps cleanup.Deps, settings json.RawMessage) (cleanup.Plugin, error) {
	s := notifySettings{Format: "slack", Events: []string{NotifyStart, NotifySuccess, NotifyFailure}}
	secrets := secretFiles{dir: deps.SecretsDir}
	if err := cleanup.DecodeSettings(NotifyName, settings, &s); err != nil {
		return nil, err
	}
	if s.URLFile == "" {
		return nil, fmt.Errorf("%s.urlFile: required (a file holding the webhook URL, mounted from a Secret)", NotifyName)
	}
	if _, err := secrets.read(NotifyName, "urlFile", s.URLFile); err != nil {
		return nil, err
	}
	if s.Format != "slack" && s.Format != "teams" {
		return nil, fmt.Errorf("%s.format: want slack or teams, got %q", NotifyName, s.Format)
	}
	for i, e := range s.Events {
		if e != NotifyStart && e != NotifySuccess && e != NotifyFailure {
			return nil, fmt.Errorf("%s.events[%d]: want start, success or failure, got %q", NotifyName, i, e)
		}
	}
	retries, err := parseRetries(NotifyName, s.Retries)
	if err != nil {
		return nil, err
	}
	if err := checkHealthURL(NotifyName, s.HealthURL); err != nil {
		return nil, err
	}
	return &notify{urlFile: s.URLFile, secrets: secrets, healthURL: s.HealthURL, format: s.Format, events: s.Events, cluster: s.Cluster, retries: retries, http: noRedirectsAway(deps.HTTP), log: deps.Log}, nil
}

func (p *notify) Name() string { return NotifyName }

// Health probes the receiver: healthURL if set, else the webhook URL itself.
func (p *notify) Health(ctx context.Context) error {
	if p.healthURL != "" {
		return probeHTTP(ctx, p.http, p.healthURL, "notify healthURL", nil, true)
	}
	target, err := p.secrets.read(NotifyName, "urlFile", p.urlFile)
	if err != nil {
		return err
	}
	return probeHTTP(ctx, p.http, target, "the notification webhook", nil, false)
}

func (p *notify) ShouldRun(*corev1.Node) bool { return true }

// Cleanup sends the start message until one was delivered for the node.
func (p *notify) Cleanup(ctx context.Context, node *corev1.Node) error {
	key := nodeKey(node)
	now := time.Now()
	p.mu.Lock()
	for k, at := range p.started {
		if now.Sub(at) > startedTTL {
			delete(p.started, k)
		}
	}
	_, done := p.started[key]
	p.mu.Unlock()
	if done {
		return nil
	}
	if err := p.send(ctx, node, NotifyStart, nil); err != nil {
		return err
	}
	if !cleanup.DryRun(ctx) {
		p.mu.Lock()
		if p.started == nil {
			p.started = map[types.UID]time.Time{}
		}
		p.started[key] = now
		p.mu.Unlock()
	}
	return nil
}

// nodeKey identifies a node across attempts: its UID, so a node re-created
// under the same name is announced again.
func nodeKey(node *corev1.Node) types.UID {
	if node.UID != "" {
		return node.UID
	}
	return types.UID("name:" + node.Name)
}

// Finished sends the success or failure message.
func (p *notify) Finished(ctx context.Context, node *corev1.Node, err error) {
	kind := NotifySuccess
	if err == nil {
		p.mu.Lock()
		delete(p.started, nodeKey(node))
		p.mu.Unlock()
	}
	if err != nil {
		kind = NotifyFailure
		if a := cleanup.Info(ctx).Attempt; a&(a-1) != 0 {
			return // not a power of two
		}
	}
	if serr := p.send(ctx, node, kind, err); serr != nil {
		p.log.Warn("notification not delivered", "node", node.Name, "kind", kind, "error", serr)
	}
}

func (p *notify) send(ctx context.Context, node *corev1.Node, kind string, cause error) error {
	if !slices.Contains(p.events, kind) {
		return nil
	}
	body, err := json.Marshal(Message(p.format, p.cluster, node.Name, kind, cleanup.Info(ctx).Attempt, cause))
	if err != nil {
		return err
	}
	if cleanup.DryRun(ctx) {
		p.log.Info("dry run: would send notification", "node", node.Name, "kind", kind, "body", string(body))
		return nil
	}
	target, err := p.secrets.read(NotifyName, "urlFile", p.urlFile)
	if err != nil {
		return err
	}
	// The URL is a secret: errors name the message, never the URL.
	if err := postJSON(ctx, p.http, jsonPost{url: target, name: "the " + kind + " message's webhook", retries: p.retries}, body); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	return nil
}

// Message is the JSON body for format (slack or teams).
func Message(format, cluster, node, kind string, attempt int, cause error) any {
	where := ""
	if cluster != "" {
		where = " in cluster " + cluster
	}
	var text, color string
	switch kind {
	case NotifyStart:
		text, color = fmt.Sprintf("Node %s%s is being deleted: cleanup started.", node, where), "0078D7"
	case NotifySuccess:
		text, color = fmt.Sprintf("Node %s%s: cleanup completed, the node is released.", node, where), "2EB886"
	default:
		text, color = fmt.Sprintf("Node %s%s: cleanup failed (attempt %d), retrying: %v", node, where, attempt, cause), "D40E0D"
	}
	if format == "teams" {
		return map[string]any{
			"@type":      "MessageCard",
			"@context":   "https://schema.org/extensions",
			"summary":    "kube-node-ready: node " + node + " cleanup " + kind,
			"themeColor": color,
			"title":      "kube-node-ready: node cleanup " + kind,
			"text":       text,
		}
	}
	return map[string]any{"text": text}
}

// redactURL drops the URL from a *url.Error, keeping the cause.
func redactURL(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && u.Unwrap() != nil {
		return u.Unwrap()
	}
	return err
}
