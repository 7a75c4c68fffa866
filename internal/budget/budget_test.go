package budget

import "testing"

func TestBudget(t *testing.T) {
	tests := []struct {
		spec    string
		total   int
		limit   int
		wantErr bool
	}{
		{spec: "10%", total: 100, limit: 10},
		{spec: "10%", total: 5, limit: 1},
		{spec: "10%", total: 0, limit: 1},
		{spec: "50%", total: 4, limit: 2},
		{spec: "3", total: 100, limit: 3},
		{spec: "0", wantErr: true},
		{spec: "-1", wantErr: true},
		{spec: "0%", wantErr: true},
		{spec: "101%", wantErr: true},
		{spec: "lots", wantErr: true},
		{spec: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			b, err := Parse(tt.spec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && b.Limit(tt.total) != tt.limit {
				t.Errorf("Limit(%d) = %d, want %d", tt.total, b.Limit(tt.total), tt.limit)
			}
		})
	}
}
