package api

// The webhook resolves the external names the agents' dns check is given
// (--check.dns.external-names, the chart's agent.dns.externalNames) from
// its own pod, every minute, and records the outcome as Events on that Pod,
// which `kubectl node-ready doctor` reads: a kubectl plugin cannot resolve
// a name from inside the cluster without exec, but it can read Events.
// Each Event's action is the name it is about (one Event, and one Event
// series, per name), so a reader never parses the note.
const (
	// ExternalNamesFlag is the flag, in the agent and the webhook alike,
	// that lists the names outside the cluster to resolve.
	ExternalNamesFlag = "check.dns.external-names"
	// EventExternalNameUnresolved is the Warning Event a webhook records on
	// its Pod at every round in which the name (the Event's action) does not
	// resolve there.
	EventExternalNameUnresolved = "ExternalNameUnresolved"
	// EventExternalNameResolved is the Normal Event a webhook records on its
	// Pod when the name (the Event's action) resolves there at its first
	// round, or again after it did not.
	EventExternalNameResolved = "ExternalNameResolved"
	// MaxExternalNameLength is the longest name an Event's action holds.
	MaxExternalNameLength = 128
)
