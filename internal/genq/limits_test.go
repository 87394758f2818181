package genq_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestLimitsCheck(t *testing.T) {
	text := genq.Limits{MaxNewTokens: 16, ContextSize: 64, VocabSize: 100}
	image := genq.Limits{ImageMaxSize: 128, ImageMaxSteps: 4}
	tests := []struct {
		name string
		lim  genq.Limits
		job  genq.Job
		want string // "" when it fits
	}{
		{"no limits known", genq.Limits{}, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 1 << 20, PromptTokenIDs: []int32{1 << 30}}}, ""},
		{"at the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 16}}, ""},
		{"max_tokens over the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 17}}, "max_tokens is 17; this server answers with at most 16 tokens"},
		{"max_completion_tokens over the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxCompletionTokens: 17}}, "max_completion_tokens is 17"},
		{"a bound over the cap: the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 32000, MaxTokensBound: true}}, ""},
		{"a bound over the cap leaves the cap's room", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 32000, MaxTokensBound: true, PromptTokenIDs: make([]int32, 49)}}, "besides the 16 of the answer"},
		{"both over the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 17, MaxCompletionTokens: 17}}, "max_tokens is 17"},
		{"max_output_tokens over the cap", text, genq.Job{TextRequest: genq.TextRequest{MaxCompletionTokens: 17, MaxTokensParam: "max_output_tokens"}}, "max_output_tokens is 17"},
		{"token id in the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{0, 99}}}, ""},
		{"token id past the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 100}}}, "token id 100; this model's vocabulary has tokens 0 to 99"},
		{"logit_bias past the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{Prompt: "x", LogitBias: map[int32]float64{100: 1}}}, "logit_bias names token 100"},
		{"prompt fills the room the cap leaves", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 48)}}, ""},
		{"prompt past the room the cap leaves", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 49)}}, "prompt is too long: 49 tokens"},
		{"a smaller answer leaves more room", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 60), MaxTokens: 4}}, ""},
		{"prompt only: the whole context", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 64), PromptOnly: true, Echo: true}}, ""},
		{"prompt only: past the context", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 65), PromptOnly: true, Echo: true}}, "context of 64 tokens"},
		{"image in bounds", image, genq.Job{ImageRequest: genq.ImageRequest{Width: 128, Height: 64, Steps: 4}}, ""},
		{"image too wide", image, genq.Job{ImageRequest: genq.ImageRequest{Width: 256, Height: 64}}, "from 64 to 128"},
		{"too many steps", image, genq.Job{ImageRequest: genq.ImageRequest{Steps: 5}}, "num_inference_steps must be between 1 and 4, not 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lim.Check(tt.job)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || genq.ErrorCode(err) != genq.Invalid):
				t.Fatalf("got %v, want an invalid error with %q", err, tt.want)
			}
		})
	}
}

func TestTightest(t *testing.T) {
	got := genq.Tightest(genq.Limits{MaxNewTokens: 32, ContextSize: 512}, genq.Limits{}, genq.Limits{MaxNewTokens: 16, VocabSize: 100})
	want := genq.Limits{MaxNewTokens: 16, ContextSize: 512, VocabSize: 100}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := genq.Tightest(); got != (genq.Limits{}) {
		t.Fatalf("no workers: %+v", got)
	}
}

// TestHeartbeatLimitsJSON: the limits are optional in a heartbeat, both
// ways: an older worker's heartbeat reads with none, and a worker that
// knows no limits sends none.
func TestHeartbeatLimitsJSON(t *testing.T) {
	var old genq.Heartbeat
	if err := json.Unmarshal([]byte(`{"worker_id":"w","variant":"B","model":"m","slots":2,"free_slots":1,"at":"2026-11-22T09:00:00Z"}`), &old); err != nil || old.Limits != nil {
		t.Fatalf("an older heartbeat: %+v, %v", old, err)
	}
	if b, _ := json.Marshal(genq.Heartbeat{WorkerID: "w"}); strings.Contains(string(b), "limits") {
		t.Fatalf("no limits sent as %s", b)
	}
	hb := genq.Heartbeat{WorkerID: "w", Limits: &genq.Limits{MaxNewTokens: 16, ContextSize: 64, VocabSize: 100}}
	b, _ := json.Marshal(hb)
	if !strings.Contains(string(b), `"limits":{"max_new_tokens":16,"context_size":64,"vocab_size":100}`) {
		t.Fatalf("limits sent as %s", b)
	}
	var back genq.Heartbeat
	if err := json.Unmarshal(b, &back); err != nil || back.Limits == nil || *back.Limits != *hb.Limits {
		t.Fatalf("read back %+v, %v", back, err)
	}
}
