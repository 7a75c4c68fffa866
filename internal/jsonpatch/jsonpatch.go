// Package jsonpatch builds RFC 6902 JSON patches. Both binaries write Nodes
// with guarded patches (a test op ahead of the change), so a concurrent
// writer's edit fails the patch instead of being overwritten.
package jsonpatch

import (
	"encoding/json"
	"strings"
)

// Op is one RFC 6902 operation.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// MarshalJSON writes value for every op but remove: a test of null or of an
// empty string must still carry it, and remove must not.
func (o Op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	return json.Marshal(struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}{o.Op, o.Path, o.Value})
}

// Test fails the whole patch unless path holds v.
func Test(path string, v any) Op { return Op{Op: "test", Path: path, Value: v} }

// Add sets path to v, creating the member or inserting into the array.
func Add(path string, v any) Op { return Op{Op: "add", Path: path, Value: v} }

// Replace sets path, which must exist, to v.
func Replace(path string, v any) Op { return Op{Op: "replace", Path: path, Value: v} }

// Remove deletes path, which must exist.
func Remove(path string) Op { return Op{Op: "remove", Path: path} }

// Marshal encodes ops as a patch; no ops is the empty patch [], not null.
func Marshal(ops ...Op) ([]byte, error) {
	if ops == nil {
		ops = []Op{}
	}
	return json.Marshal(ops)
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// EscapePointer escapes key for use as one JSON pointer segment (RFC 6901):
// label and annotation keys carry '/'.
func EscapePointer(key string) string { return pointerEscaper.Replace(key) }
