package jsonpatch

import (
	"testing"

	evanphx "gopkg.in/evanphx/json-patch.v4"
)

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		ops  []Op
		want string
	}{
		{name: "no ops is the empty patch", want: `[]`},
		{name: "test of null keeps its value", ops: []Op{Test("/metadata/finalizers", nil)}, want: `[{"op":"test","path":"/metadata/finalizers","value":null}]`},
		{name: "test of an empty string keeps its value", ops: []Op{Test("/metadata/resourceVersion", "")}, want: `[{"op":"test","path":"/metadata/resourceVersion","value":""}]`},
		{name: "empty list stays a list", ops: []Op{Replace("/spec/taints", []string{})}, want: `[{"op":"replace","path":"/spec/taints","value":[]}]`},
		{name: "add of a nil map is null", ops: []Op{Add("/a", map[string]string(nil))}, want: `[{"op":"add","path":"/a","value":null}]`},
		{name: "remove has no value", ops: []Op{Remove("/metadata/finalizers/0")}, want: `[{"op":"remove","path":"/metadata/finalizers/0"}]`},
		{
			name: "guarded append in order",
			ops:  []Op{Test("/metadata/finalizers", []string{"a/b"}), Add("/metadata/finalizers/-", "c/d")},
			want: `[{"op":"test","path":"/metadata/finalizers","value":["a/b"]},{"op":"add","path":"/metadata/finalizers/-","value":"c/d"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.ops...)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestApply checks the patches mean what the API server (which uses the same
// implementation) makes of them.
func TestApply(t *testing.T) {
	const doc = `{"metadata":{"labels":{"a/b":"x","c~d":"y"},"resourceVersion":"7"},"spec":{"taints":[]}}`
	tests := []struct {
		name    string
		ops     []Op
		want    string
		wantErr bool
	}{
		{
			name: "test passes, then add",
			ops:  []Op{Test("/metadata/resourceVersion", "7"), Add("/metadata/labels/"+EscapePointer("e/f"), "z")},
			want: `{"metadata":{"labels":{"a/b":"x","c~d":"y","e/f":"z"},"resourceVersion":"7"},"spec":{"taints":[]}}`,
		},
		{name: "test fails the patch", ops: []Op{Test("/metadata/resourceVersion", "6"), Add("/metadata/labels/e", "z")}, wantErr: true},
		{name: "test of an absent member as null", ops: []Op{Test("/metadata/finalizers", nil), Add("/metadata/finalizers", []string{"f"})},
			want: `{"metadata":{"finalizers":["f"],"labels":{"a/b":"x","c~d":"y"},"resourceVersion":"7"},"spec":{"taints":[]}}`},
		{name: "replace escaped keys", ops: []Op{Replace("/metadata/labels/"+EscapePointer("a/b"), "1"), Remove("/metadata/labels/" + EscapePointer("c~d"))},
			want: `{"metadata":{"labels":{"a/b":"1"},"resourceVersion":"7"},"spec":{"taints":[]}}`},
		{name: "remove of an absent member fails", ops: []Op{Remove("/metadata/labels/zz")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, err := Marshal(tt.ops...)
			if err != nil {
				t.Fatal(err)
			}
			p, err := evanphx.DecodePatch(raw)
			if err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			got, err := p.Apply([]byte(doc))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("apply %s = %s, want an error", raw, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("apply %s: %v", raw, err)
			}
			if !evanphx.Equal(got, []byte(tt.want)) {
				t.Errorf("apply %s = %s, want %s", raw, got, tt.want)
			}
		})
	}
}

func TestEscapePointer(t *testing.T) {
	tests := []struct{ key, want string }{
		{"plain", "plain"},
		{"node-ready/verified", "node-ready~1verified"},
		{"a~b", "a~0b"},
		// ~ first: "~1" in a key must not read back as "/".
		{"~1/", "~01~1"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := EscapePointer(tt.key); got != tt.want {
				t.Errorf("EscapePointer(%q) = %q, want %q", tt.key, got, tt.want)
			}
		})
	}
}
