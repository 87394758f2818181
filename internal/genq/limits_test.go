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
		{"max_tokens over the cap: capped", text, genq.Job{TextRequest: genq.TextRequest{MaxTokens: 32000}}, ""},
		{"token id in the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{0, 99}}}, ""},
		{"token id past the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 100}}}, "token id 100; this model's vocabulary has tokens 0 to 99"},
		{"logit_bias past the vocabulary", text, genq.Job{TextRequest: genq.TextRequest{Prompt: "x", LogitBias: map[int32]float64{100: 1}}}, "logit_bias names token 100"},
		{"token ids past the context", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 64)}},
			"This model's maximum context length is 64 tokens. However, your prompt resulted in 64 tokens."},
		{"token ids and max_tokens past the context", text, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: make([]int32, 60), MaxTokens: 8}},
			"you requested 68 tokens (60 in the prompt, 8 in the completion)"},
		{"a prompt of text is the worker's to measure", text, genq.Job{TextRequest: genq.TextRequest{Prompt: strings.Repeat("x ", 100), MaxTokens: 60}}, ""},
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

// TestLimitsAnswer: the answer's length, and the refusals of what the
// context cannot hold, for every kind of job.
func TestLimitsAnswer(t *testing.T) {
	capped := genq.Limits{MaxNewTokens: 16, ContextSize: 64}
	context := genq.Limits{ContextSize: 64} // the cap is what the context leaves
	chat := func(tr genq.TextRequest) genq.Job {
		tr.Messages = []genq.Message{{Role: genq.RoleUser, Content: "x"}}
		return genq.Job{TextRequest: tr}
	}
	tests := []struct {
		name   string
		lim    genq.Limits
		job    genq.Job
		prompt int
		answer int
		err    *genq.ContextExceeded // the refusal, nil when it fits
		field  string
	}{
		{"no max_tokens: the cap", capped, chat(genq.TextRequest{}), 10, 16, nil, ""},
		{"no max_tokens: what the context leaves, below the cap", capped, chat(genq.TextRequest{}), 60, 4, nil, ""},
		{"no max_tokens, no cap: what the context leaves", context, chat(genq.TextRequest{}), 10, 54, nil, ""},
		{"max_tokens under the cap", capped, chat(genq.TextRequest{MaxTokens: 5}), 10, 5, nil, ""},
		{"max_tokens over the cap: the cap", capped, chat(genq.TextRequest{MaxTokens: 32000}), 10, 16, nil, ""},
		{"max_completion_tokens over the cap: the cap", capped, chat(genq.TextRequest{MaxCompletionTokens: 32000}), 10, 16, nil, ""},
		{"max_tokens fills the context", context, chat(genq.TextRequest{MaxTokens: 54}), 10, 54, nil, ""},
		{"max_tokens past the context", context, chat(genq.TextRequest{MaxTokens: 55}), 10, 0,
			&genq.ContextExceeded{Prompt: 10, Answer: 55, Context: 64, Input: "messages"}, "max_tokens"},
		{"capped max_tokens past the context", capped, chat(genq.TextRequest{MaxTokens: 32000}), 50, 0,
			&genq.ContextExceeded{Prompt: 50, Answer: 16, Context: 64, Input: "messages"}, "max_tokens"},
		{"max_output_tokens past the context", context, chat(genq.TextRequest{MaxCompletionTokens: 60, MaxTokensParam: "max_output_tokens"}), 10, 0,
			&genq.ContextExceeded{Prompt: 10, Answer: 60, Context: 64, Input: "messages"}, "max_output_tokens"},
		{"a bound past the context: what the context leaves", context, chat(genq.TextRequest{MaxTokens: 128000, MaxTokensBound: true}), 10, 54, nil, ""},
		{"a capped bound past the context: what the context leaves", capped, chat(genq.TextRequest{MaxTokens: 128000, MaxTokensBound: true}), 50, 14, nil, ""},
		{"a bound whose prompt fills the context", context, chat(genq.TextRequest{MaxTokens: 128000, MaxTokensBound: true}), 64, 0,
			&genq.ContextExceeded{Prompt: 64, Context: 64, Input: "messages"}, "messages"},
		{"a prompt that fills the context", context, chat(genq.TextRequest{}), 64, 0,
			&genq.ContextExceeded{Prompt: 64, Context: 64, Input: "messages"}, "messages"},
		{"a prompt past the context, with max_tokens: the prompt is to shorten", context, chat(genq.TextRequest{MaxTokens: 8}), 90, 0,
			&genq.ContextExceeded{Prompt: 90, Context: 64, Input: "messages"}, "messages"},
		{"a raw prompt past the context", context, genq.Job{TextRequest: genq.TextRequest{Prompt: "x"}}, 65, 0,
			&genq.ContextExceeded{Prompt: 65, Context: 64, Input: "prompt"}, "prompt"},
		{"scoring: the whole context", context, genq.Job{TextRequest: genq.TextRequest{Prompt: "x", PromptOnly: true, Echo: true}}, 64, 0, nil, ""},
		{"scoring past the context", context, genq.Job{TextRequest: genq.TextRequest{Prompt: "x", PromptOnly: true, Echo: true}}, 65, 0,
			&genq.ContextExceeded{Prompt: 65, Context: 64, Input: "prompt"}, "prompt"},
		{"a count: any prompt", context, chat(genq.TextRequest{CountOnly: true, MaxTokens: 1}), 1 << 20, 0, nil, ""},
		{"no context known: the cap", genq.Limits{MaxNewTokens: 16}, chat(genq.TextRequest{MaxTokens: 100}), 1 << 20, 16, nil, ""},
		{"nothing known: no bound", genq.Limits{}, chat(genq.TextRequest{}), 1 << 20, 0, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.lim.Answer(tt.job, tt.prompt)
			if tt.err == nil {
				if err != nil || got != tt.answer {
					t.Fatalf("got %d, %v; want %d", got, err, tt.answer)
				}
				return
			}
			ce, ok := genq.ContextExceededOf(err)
			if !ok || ce != *tt.err || genq.ErrorCode(err) != genq.Invalid || genq.ErrorField(err) != tt.field {
				t.Fatalf("got %v (%+v, field %q); want %+v, field %q", err, ce, genq.ErrorField(err), *tt.err, tt.field)
			}
			// As a worker's error reply carries it: its code and message.
			back, ok := genq.ContextExceededOf(genq.Errorf(genq.ErrorCode(err), "%s", genq.ErrorMessage(err)))
			if !ok || back != *tt.err {
				t.Fatalf("read back from %q: %+v, %v", genq.ErrorMessage(err), back, ok)
			}
		})
	}
}

// TestContextExceededMessages: OpenAI's words, and no other message
// reads as one.
func TestContextExceededMessages(t *testing.T) {
	for _, tt := range []struct {
		ce   genq.ContextExceeded
		want string
	}{
		{genq.ContextExceeded{Prompt: 90000, Answer: 32000, Context: 100000, Input: "messages"},
			"This model's maximum context length is 100000 tokens. However, you requested 122000 tokens (90000 in the messages, 32000 in the completion). Please reduce the length of the messages or completion."},
		{genq.ContextExceeded{Prompt: 140000, Context: 131072, Input: "prompt"},
			"This model's maximum context length is 131072 tokens. However, your prompt resulted in 140000 tokens. Please reduce the length of the prompt."},
	} {
		if got := tt.ce.Error(); got != tt.want {
			t.Errorf("got %q\nwant %q", got, tt.want)
		}
	}
	for _, err := range []error{
		genq.Errorf(genq.Invalid, "prompt is too long"),
		genq.Errorf(genq.Invalid, "This model's maximum context length is 10 tokens. However, your prompt resulted in 12 tokens. Please reduce the length of the prompt. And more."),
		genq.Errorf(genq.Internal, "This model's maximum context length is 10 tokens. However, your prompt resulted in 12 tokens. Please reduce the length of the prompt."),
		nil,
	} {
		if ce, ok := genq.ContextExceededOf(err); ok {
			t.Errorf("%v read as %+v", err, ce)
		}
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
