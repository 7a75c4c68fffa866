package harness

import (
	"strings"
	"testing"
)

const exposition = `# HELP node_cleanup_webhook_requests_total Admission requests.
# TYPE node_cleanup_webhook_requests_total counter
node_cleanup_webhook_requests_total{operation="CREATE",result="patched"} 3
node_cleanup_webhook_requests_total{operation="CREATE",result="skipped"} 2
node_cleanup_webhook_requests_total{operation="UPDATE",result="patched"} 1
node_cleanup_webhook_requests_total_extra{operation="CREATE",result="patched"} 100
node_cleanup_leader 1
apiserver_request_total{code="200",resource="nodes",note="a } and a \" inside",verb="GET"} 7 1700000000000
`

func TestSumMetric(t *testing.T) {
	tests := []struct {
		name   string
		metric string
		match  []string
		want   float64
	}{
		{"every sample", "node_cleanup_webhook_requests_total", nil, 6},
		{"one label", "node_cleanup_webhook_requests_total", []string{`result="patched"`}, 4},
		{"every label must match", "node_cleanup_webhook_requests_total", []string{`operation="CREATE"`, `result="patched"`}, 3},
		{"no labels", "node_cleanup_leader", nil, 1},
		{"braces and quotes in a value, and a timestamp", "apiserver_request_total", []string{`verb="GET"`}, 7},
		{"absent", "node_cleanup_nodes_with_finalizer", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := SumMetric(strings.NewReader(exposition), tt.metric, tt.match...)
			if err != nil || got != tt.want {
				t.Errorf("SumMetric(%s, %q) = %v, %v; want %v", tt.metric, tt.match, got, err, tt.want)
			}
		})
	}
}

func TestSampleLabel(t *testing.T) {
	samples, err := Samples(strings.NewReader(exposition), "apiserver_request_total")
	if err != nil || len(samples) != 1 {
		t.Fatalf("Samples = %v, %v; want one", samples, err)
	}
	for label, want := range map[string]string{"code": "200", "resource": "nodes", "verb": "GET", "note": `a } and a " inside`, "absent": ""} {
		if got := samples[0].Label(label); got != want {
			t.Errorf("Label(%q) = %q, want %q", label, got, want)
		}
	}
}
