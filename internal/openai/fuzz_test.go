package openai

import (
	"testing"

	"github.com/genq/genq/internal/genq"
)

// FuzzDecodeV1 feeds arbitrary bodies to the decoders of the two /v1 text
// routes: they must never panic, every refusal must be a clear 400, and
// every job they accept must pass the checks every component makes.
func FuzzDecodeV1(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3,"logit_bias":{"5":-100}}`,
		`{"prompt":"x","logprobs":2,"frequency_penalty":-2,"presence_penalty":2,"top_k":-1,"min_p":0.5}`,
		`{"prompt":"x","repetition_penalty":1.1,"ignore_eos":true,"max_tokens":3}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":[{}],"tool_choice":"none"}`,
		`{"prompt":["x"],"logit_bias":{"a":1}}`, `{"prompt":"x","response_format":{"type":"json_object"}}`,
		`{"messages":[],"stop":["a","b"],"n":1,"seed":-1}`, `{"prompt":"x","max_tokens":0}`, `[]`, `{`,
	} {
		f.Add([]byte(seed), true)
		f.Add([]byte(seed), false)
	}
	const maxPrompt = 256
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		job := genq.Job{Envelope: genq.Envelope{ID: "fuzz", Variant: genq.VariantB}}
		decode := DecodeCompletion
		if chat {
			decode = DecodeChat
		}
		_, err := decode(body, maxPrompt, &job)
		if err == nil {
			err = job.Validate()
		}
		if err != nil {
			if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) == "" {
				t.Fatalf("refusal %v is not a clear 400", err)
			}
			return
		}
		if !job.Detailed() {
			t.Fatalf("accepted a job without messages or prompt: %+v", job)
		}
	})
}
