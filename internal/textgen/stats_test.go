package textgen

import (
	"testing"
	"time"
)

func TestWindowSince(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := window{start: start, tokens: 100, steps: 10, plan: 1e6, compute: 2e6, finish: 3e6}
	tests := []struct {
		name   string
		prev   window
		w      window
		want   throughput
		wantOK bool
	}{
		{"no window before", window{}, window{start: start, tokens: 5, steps: 1}, throughput{}, false},
		{"no step since", prev, window{start: start.Add(10 * time.Second), tokens: 100, steps: 10}, throughput{}, false},
		{
			"two steps in two seconds", prev,
			window{start: start.Add(2 * time.Second), tokens: 140, steps: 12, plan: 3e6, compute: 8e6, finish: 4e6},
			throughput{tokensPerSecond: 20, steps: 2, planMS: 1, computeMS: 3, finishMS: 0.5}, true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.w.since(tt.prev)
			if ok != tt.wantOK || got != tt.want {
				t.Fatalf("since = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}
