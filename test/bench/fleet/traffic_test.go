package fleet

import (
	"bytes"
	"testing"
)

// TestUntaintMarker: the bytes are noted as the untaint's line passes, once,
// and every line reaches the log.
func TestUntaintMarker(t *testing.T) {
	var out bytes.Buffer
	tr := &Traffic{}
	m := untaintMarker{w: &out, t: tr}
	tr.bytes.Store(100)
	if _, err := m.Write([]byte(`{"msg":"round passed"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.BytesAtUntaint(); ok {
		t.Fatal("noted before the untaint's line")
	}
	tr.bytes.Store(200)
	if _, err := m.Write([]byte(`{"msg":"` + UntaintMsg + `","node":"n"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	tr.bytes.Store(5000) // a watch event after it
	if _, err := m.Write([]byte(`{"msg":"` + UntaintMsg + `","node":"n"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if got, ok := tr.BytesAtUntaint(); !ok || got != 200 {
		t.Errorf("BytesAtUntaint = %d, %v; want 200, true (the first untaint line's)", got, ok)
	}
	if n := bytes.Count(out.Bytes(), []byte("\n")); n != 3 {
		t.Errorf("%d lines reached the log, want 3", n)
	}
}
