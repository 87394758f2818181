package httpapi

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// usageIn finds a result's usage wherever it stands, and in a result cut
// short when it comes before the cut.
func TestUsageIn(t *testing.T) {
	vectors := `[` + strings.Repeat(`[0.1,0.2,0.3],`, 1000) + `[0.4]]`
	tests := []struct {
		name string
		data string
		want genq.Usage
		ok   bool
	}{
		{"a text result", `{"generated_text":"hi","usage":{"prompt_tokens":5,"completion_tokens":2,"cached_tokens":1}}`, genq.Usage{PromptTokens: 5, CompletionTokens: 2, CachedTokens: 1}, true},
		{"an embedding result", `{"usage":{"prompt_tokens":7},"embeddings":` + vectors + `,"tokens":[7]}`, genq.Usage{PromptTokens: 7}, true},
		{"an embedding result cut short", (`{"usage":{"prompt_tokens":9},"embeddings":` + vectors)[:2000], genq.Usage{PromptTokens: 9}, true},
		{"usage after the cut", (`{"embeddings":` + vectors + `,"usage":{"prompt_tokens":9}}`)[:2000], genq.Usage{}, false},
		{"no usage", `{"generated_text":"hi"}`, genq.Usage{}, false},
		{"not JSON", `PNG…`, genq.Usage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := usageIn([]byte(tt.data))
			if ok != tt.ok || got != tt.want {
				t.Fatalf("usageIn: %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
