package textgen

import "testing"

func TestSequenceMaxTokens(t *testing.T) {
	withLimit := newRequest(nil, nil)
	withLimit.maxTokens = 7
	tests := []struct {
		name string
		seq  *sequence
		want int
	}{
		{"no request: the context", &sequence{}, 20},
		{"a request without a limit: the context", &sequence{req: newRequest(nil, nil)}, 20},
		{"the request's own", &sequence{req: withLimit}, 7},
	}
	for _, tt := range tests {
		if got := tt.seq.maxTokens(20); got != tt.want {
			t.Errorf("%s: maxTokens = %d, want %d", tt.name, got, tt.want)
		}
	}
}
