package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/genq/genq/internal/httpapi"
)

// legacyCompletion is a /v1/completions answer with its log-probabilities,
// as evaluation harnesses read it.
type legacyCompletion struct {
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			Tokens        []string             `json:"tokens"`
			TokenLogprobs []*float64           `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// TestCompletionPrompts: /v1/completions answers a list of prompts, n
// choices each, indexed prompt by prompt, each as the prompt alone gets
// it; a scoring batch (max_tokens 0 with echo) gets each prompt scored and
// nothing generated, the scores an answering echo gives; a stream carries
// every prompt's choices by index; and past the bounds a 400 names them.
func TestCompletionPrompts(t *testing.T) {
	const key = "" // s.stream sends none
	s := newStack(t, stackOptions{http: httpapi.Config{QueueCapacity: 10}})
	s.tinyTextWorker(16)
	prompts := []string{"Once upon a time", "The queue was", "A worker pulled"}
	list, _ := json.Marshal(prompts)

	t.Run("a batch, n choices each", func(t *testing.T) {
		r := s.postKey("/v1/completions", key, `{"prompt":`+string(list)+`,"n":2,"max_tokens":4,"temperature":0}`)
		got := decodeAs[legacyCompletion](t, r)
		if r.status != http.StatusOK || len(got.Choices) != 6 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		promptTokens := 0
		for i, p := range prompts {
			alone := decodeAs[legacyCompletion](t, s.postKey("/v1/completions", key, fmt.Sprintf(`{"prompt":%q,"max_tokens":4,"temperature":0}`, p)))
			promptTokens += alone.Usage.PromptTokens
			for c := range 2 {
				if ch := got.Choices[2*i+c]; ch.Index != 2*i+c || ch.Text != alone.Choices[0].Text {
					t.Errorf("prompt %d, choice %d: index %d %q; alone %q", i, c, ch.Index, ch.Text, alone.Choices[0].Text)
				}
			}
		}
		if got.Usage.PromptTokens != promptTokens || got.Usage.CompletionTokens != 6*4 {
			t.Errorf("usage %+v; the prompts alone take %d tokens", got.Usage, promptTokens)
		}
	})

	t.Run("a scoring batch: max_tokens 0 with echo", func(t *testing.T) {
		r := s.postKey("/v1/completions", key, `{"prompt":`+string(list)+`,"echo":true,"logprobs":1,"max_tokens":0,"temperature":0}`)
		got := decodeAs[legacyCompletion](t, r)
		if r.status != http.StatusOK || len(got.Choices) != 3 || got.Usage.CompletionTokens != 0 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		for i, p := range prompts {
			ch := got.Choices[i]
			answering := decodeAs[legacyCompletion](t, s.postKey("/v1/completions", key,
				fmt.Sprintf(`{"prompt":%q,"echo":true,"logprobs":1,"max_tokens":1,"temperature":0}`, p)))
			want := answering.Choices[0].Logprobs
			if ch.Index != i || ch.FinishReason != "length" || ch.Logprobs == nil || len(ch.Logprobs.TokenLogprobs) != len(want.TokenLogprobs)-1 ||
				!strings.HasPrefix(answering.Choices[0].Text, ch.Text) || ch.Text == "" {
				t.Fatalf("prompt %d: %+v; answering %+v", i, ch, answering.Choices[0])
			}
			if ch.Logprobs.TokenLogprobs[0] != nil {
				t.Errorf("prompt %d: its first token is scored", i)
			}
			for k, lp := range ch.Logprobs.TokenLogprobs[1:] {
				if w := want.TokenLogprobs[k+1]; lp == nil || w == nil || *lp-*w > 1e-4 || *w-*lp > 1e-4 || len(ch.Logprobs.TopLogprobs[k+1]) == 0 {
					t.Errorf("prompt %d, token %d: %v, answering %v", i, k+1, lp, w)
				}
			}
		}
	})

	t.Run("a batch streamed by index", func(t *testing.T) {
		resp, events := s.stream(t.Context(), "/v1/completions", `{"prompt":["a b","c d"],"max_tokens":3,"temperature":0,"stream":true}`, nil)
		if resp.StatusCode != http.StatusOK || len(events) == 0 || events[len(events)-1].data != "[DONE]" {
			t.Fatalf("%d, %d events", resp.StatusCode, len(events))
		}
		texts, finished := map[int]string{}, map[int]string{}
		for _, e := range events[:len(events)-1] {
			var c struct {
				Choices []struct {
					Index        int     `json:"index"`
					Text         string  `json:"text"`
					FinishReason *string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(e.data), &c); err != nil || len(c.Choices) != 1 {
				t.Fatalf("event %q: %v", e.data, err)
			}
			ch := c.Choices[0]
			texts[ch.Index] += ch.Text
			if ch.FinishReason != nil {
				finished[ch.Index] = *ch.FinishReason
			}
		}
		whole := decodeAs[legacyCompletion](t, s.postKey("/v1/completions", key, `{"prompt":["a b","c d"],"max_tokens":3,"temperature":0}`))
		for i := range 2 {
			if texts[i] != whole.Choices[i].Text || finished[i] != "length" {
				t.Errorf("choice %d streamed %q (%q), whole %q", i, texts[i], finished[i], whole.Choices[i].Text)
			}
		}
	})

	for _, tt := range []struct{ name, body, want string }{
		{"prompts × n over QUEUE_CAPACITY", `{"prompt":["a","b","c","d"],"n":3}`,
			"this request asks for 12 answers (prompts × n), and the queue holds at most 10 jobs (QUEUE_CAPACITY)"},
		{"n over QUEUE_CAPACITY with a token prompt", `{"prompt":[[1,2],[3],[4],[5],[6],[7]],"n":2}`, "the queue holds at most 10 jobs (QUEUE_CAPACITY)"},
		{"prompts × n over the request's bound", `{"prompt":[` + strings.Repeat(`"a",`, 16) + `"a"],"n":4}`, "at most 64 per request (prompts × n)"},
		{"max_tokens 0 without echo", `{"prompt":["a","b"],"max_tokens":0}`, "0 is for scoring a prompt, with echo: true"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey("/v1/completions", key, tt.body)
			if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, tt.want) ||
				e.Error.Type != "invalid_request_error" {
				t.Fatalf("%d %s; want 400 with %q", r.status, r.body, tt.want)
			}
			if !strings.HasPrefix(r.header.Get(httpapi.HeaderRequestID), "req_") {
				t.Errorf("X-Request-Id %q", r.header.Get(httpapi.HeaderRequestID))
			}
		})
	}
}

// TestAsyncJobOverTheCap: an asynchronous job whose max_tokens is past
// the worker's cap is capped, queued before any worker is live as after;
// one past what the worker's model can read (a token id past its
// vocabulary) is a 400 at submit once a worker's heartbeat tells its
// limits, naming the field, and nothing is queued.
func TestAsyncJobOverTheCap(t *testing.T) {
	s := newStack(t, stackOptions{})
	early := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"x","max_tokens":17}}`)
	if early.status != http.StatusAccepted {
		t.Fatalf("with no live worker: %d %s", early.status, early.body)
	}
	s.tinyTextWorker(16)
	if st := s.waitJob(decodeAs[jobStatus](t, early).ID); st.Status != "succeeded" {
		t.Fatalf("the job queued before any worker: %+v", st)
	}
	for _, request := range []string{`{"prompt":"x","max_tokens":17}`, `{"messages":[{"role":"user","content":"x"}],"max_completion_tokens":32000}`} {
		typ := "completion"
		if strings.Contains(request, "messages") {
			typ = "chat.completion"
		}
		r := s.postKey("/v1/jobs", "", fmt.Sprintf(`{"type":%q,"request":%s}`, typ, request))
		if st := s.waitJob(decodeAs[jobStatus](t, r).ID); r.status != http.StatusAccepted || st.Status != "succeeded" {
			t.Fatalf("%s: %d %+v; want it capped and done", request, r.status, st)
		}
	}
	before := s.jobsPublished()
	r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":[1,99999999]}}`)
	if e := decodeAs[v1Err](t, r); r.status != http.StatusBadRequest || !strings.Contains(e.Error.Message, "vocabulary has tokens 0 to") {
		t.Fatalf("%d %s; want 400 naming the vocabulary", r.status, r.body)
	}
	if after := s.jobsPublished(); after != before {
		t.Fatalf("a refused job was queued (sequence %d, then %d)", before, after)
	}
}
