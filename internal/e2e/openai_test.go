package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// tinyTextWorker serves the tiny random-weight model of variant B through a
// real worker: greedy, every answer maxNew tokens long unless a stop string
// ends it (a random model's end-of-turn would come at a random place).
func (s *stack) tinyTextWorker(maxNew int) string {
	return s.tinyTextWorkerWith(textgen.Config{Slots: 2, Threads: 1, MaxNewTokens: maxNew, IgnoreEOS: true})
}

// tinyTextWorkerWith serves the tiny model with cfg, its model file set.
func (s *stack) tinyTextWorkerWith(cfg textgen.Config) string {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), tinygguf.FileName(genq.VariantB, "tiny"))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		s.t.Fatal(err)
	}
	cfg.ModelFile = path
	b, err := textgen.Open(context.Background(), cfg, testLog(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { b.Close() }) // after the worker stops: cleanups run last first
	s.startWorkerBackend(b)
	s.waitLive(1)
	return filepath.Base(path)
}

func (s *stack) postKey(path, key, body string) response {
	s.t.Helper()
	return s.postHeader(path, body, keyHeader(key))
}

// keyHeader carries key as a bearer token; no key, no header.
func keyHeader(key string) http.Header {
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	return h
}

// postHeader posts a JSON body with the headers in h besides its type.
func (s *stack) postHeader(path, body string, h http.Header) response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.api.URL+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header = h.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r response
	r.status, r.header = resp.StatusCode, resp.Header
	r.body, _ = io.ReadAll(resp.Body)
	r.trailer = resp.Trailer
	return r
}

type v1Err struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

type chatCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string          `json:"role"`
			Content   string          `json:"content"`
			ToolCalls []genq.ToolCall `json:"tool_calls"`
		} `json:"message"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func decodeAs[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("%d %q: %v", r.status, r.body, err)
	}
	return v
}

func TestOpenAIRoutes(t *testing.T) {
	const key = "sk-test"
	s := newStack(t, stackOptions{http: httpapi.Config{APIKeys: []string{key}}})
	model := s.tinyTextWorker(16)

	t.Run("chat", func(t *testing.T) {
		start := time.Now().Unix()
		r := s.postKey("/v1/chat/completions", key, `{"model":"anything","messages":[
			{"role":"system","content":"be brief"},{"role":"user","content":"hi"},
			{"role":"assistant","content":"hello"},{"role":"user","content":[{"type":"text","text":"more"}]}],
			"max_tokens":5,"temperature":0,"seed":1}`)
		c := decodeAs[chatCompletion](t, r)
		if r.status != http.StatusOK || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" ||
			c.Created < start || c.Model != model || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" ||
			c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 5 || c.Usage.PromptTokens < 20 ||
			c.Usage.TotalTokens != c.Usage.PromptTokens+5 || r.header.Get(httpapi.HeaderJobID) == "" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("stop strings end the answer before them", func(t *testing.T) {
		body := `{"messages":[{"role":"user","content":"count"}],"temperature":0,"max_completion_tokens":16%s}`
		full := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", key, strings.Replace(body, "%s", "", 1)))
		text := []rune(full.Choices[0].Message.Content)
		if len(text) < 6 {
			t.Fatalf("answer %q too short to cut", string(text))
		}
		stop, _ := json.Marshal(string(text[3:5]))
		cut := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", key, strings.Replace(body, "%s", `,"stop":`+string(stop), 1)))
		want := string(text)[:strings.Index(string(text), string(text[3:5]))]
		if got := cut.Choices[0].Message.Content; got != want || cut.Choices[0].FinishReason != "stop" {
			t.Fatalf("with stop %s: %q (%s), want %q", stop, got, cut.Choices[0].FinishReason, want)
		}
	})
	t.Run("a prompt of token ids", func(t *testing.T) {
		r := s.postKey("/v1/completions", key, `{"prompt":[[5,6,7,8]],"max_tokens":3}`)
		c := decodeAs[chatCompletion](t, r)
		if r.status != http.StatusOK || c.Usage.PromptTokens != 4 || c.Usage.CompletionTokens != 3 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("completions", func(t *testing.T) {
		r := s.postKey("/v1/completions", key, `{"model":"m","prompt":"Once upon a time","max_tokens":4}`)
		c := decodeAs[chatCompletion](t, r)
		if r.status != http.StatusOK || !strings.HasPrefix(c.ID, "cmpl-") || c.Object != "text_completion" ||
			len(c.Choices) != 1 || c.Choices[0].FinishReason != "length" || c.Usage.CompletionTokens != 4 || c.Usage.PromptTokens < 2 {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("penalties and biases reach the worker", func(t *testing.T) {
		// The tiny model's vocabulary is byte-level: ids 65 and 66 are "A"
		// and "B". Raised by 100, they are all greedy picks; the frequency
		// penalty makes them take turns. The fields that ask for nothing
		// genq lacks (no tools called, plain text, no logprobs) pass.
		r := s.postKey("/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"max_tokens":16,
			"temperature":0,"logit_bias":{"65":100,"66":100},"frequency_penalty":2,"presence_penalty":0,
			"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none",
			"response_format":{"type":"text"},"logprobs":false,"top_logprobs":0}`)
		c := decodeAs[chatCompletion](t, r)
		if r.status != http.StatusOK || len(c.Choices) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		text := c.Choices[0].Message.Content
		if len(text) != 16 || strings.Trim(text, "AB") != "" || !strings.Contains(text, "A") || !strings.Contains(text, "B") {
			t.Fatalf("answer %q: want 16 letters, A and B by turns", text)
		}
	})
	t.Run("vLLM's top_k and min_p reach the worker", func(t *testing.T) {
		ask := func(extra string) string {
			r := s.postKey("/v1/completions", key, `{"prompt":"Once upon a time","max_tokens":16`+extra+`}`)
			c := decodeAs[chatCompletion](t, r)
			if r.status != http.StatusOK || len(c.Choices) != 1 {
				t.Fatalf("%d %s", r.status, r.body)
			}
			return c.Choices[0].Text
		}
		greedy := ask(`,"temperature":0`)
		for _, extra := range []string{`,"temperature":2,"top_k":1,"seed":5`, `,"temperature":2,"top_k":-1,"min_p":1,"seed":6`} {
			if got := ask(extra); got != greedy {
				t.Errorf("with %s: %q; only the best token may be drawn, as greedy draws %q", extra, got, greedy)
			}
		}
		if r := s.postKey("/v1/completions", key, `{"prompt":"x","min_p":1.5}`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "min_p must be between 0 and 1") {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
	t.Run("logprobs in OpenAI's two shapes", func(t *testing.T) {
		r := s.postKey("/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"max_tokens":6,
			"temperature":0,"logprobs":true,"top_logprobs":3}`)
		var chat struct {
			Choices []struct {
				Message  struct{ Content string }
				Logprobs struct {
					Content []struct {
						Token       string
						Logprob     float64
						Bytes       []int
						TopLogprobs []struct {
							Token   string
							Logprob float64
						} `json:"top_logprobs"`
					}
					Refusal *[]any
				}
			}
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(r.body, &chat); err != nil || r.status != http.StatusOK || len(chat.Choices) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		entries := chat.Choices[0].Logprobs.Content
		if len(entries) == 0 || len(entries) > chat.Usage.CompletionTokens || chat.Choices[0].Logprobs.Refusal != nil {
			t.Fatalf("%d entries for %d tokens: %s", len(entries), chat.Usage.CompletionTokens, r.body)
		}
		for _, e := range entries {
			// Greedy: the chosen token is the most likely.
			if len(e.TopLogprobs) != 3 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob ||
				e.Logprob > 0 || len(e.Bytes) != len(e.Token) && !strings.ContainsRune(e.Token, utf8.RuneError) {
				t.Fatalf("entry %+v of %s", e, r.body)
			}
		}

		r = s.postKey("/v1/completions", key, `{"prompt":"Once upon a time","max_tokens":6,"logprobs":2,"seed":4}`)
		var comp struct {
			Choices []struct {
				Text     string
				Logprobs struct {
					Tokens        []string
					TokenLogprobs []float64            `json:"token_logprobs"`
					TopLogprobs   []map[string]float64 `json:"top_logprobs"`
					TextOffset    []int                `json:"text_offset"`
				}
			}
		}
		if err := json.Unmarshal(r.body, &comp); err != nil || r.status != http.StatusOK || len(comp.Choices) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		lp := comp.Choices[0].Logprobs
		n := len(lp.Tokens)
		if n == 0 || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n || lp.TextOffset[0] != 0 {
			t.Fatalf("columns of unequal lengths: %s", r.body)
		}
		for i := range n {
			// Each top holds the two best and the sampled token, fewer
			// where tokens read alike (bytes that are not UTF-8).
			if top := lp.TopLogprobs[i]; len(top) < 1 || len(top) > 3 || top[lp.Tokens[i]] != lp.TokenLogprobs[i] {
				t.Fatalf("position %d: %v for %q (%v)", i, top, lp.Tokens[i], lp.TokenLogprobs[i])
			}
			if i > 0 && lp.TextOffset[i] < lp.TextOffset[i-1] || lp.TextOffset[i] > utf8.RuneCountInString(comp.Choices[0].Text) {
				t.Fatalf("text offsets %v in %q", lp.TextOffset, comp.Choices[0].Text)
			}
		}

		r = s.postKey("/v1/completions", key, `{"prompt":"x","max_tokens":2}`)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"logprobs":null`) {
			t.Fatalf("without logprobs: %d %s", r.status, r.body)
		}
	})
	t.Run("n choices, each its own seed", func(t *testing.T) {
		ask := func(extra string) chatCompletion {
			r := s.postKey("/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"max_tokens":8,"temperature":1.5`+extra+`}`)
			c := decodeAs[chatCompletion](t, r)
			if r.status != http.StatusOK {
				t.Fatalf("%d %s", r.status, r.body)
			}
			return c
		}
		three := ask(`,"n":3,"seed":11`)
		if len(three.Choices) != 3 || three.Usage.CompletionTokens != 24 {
			t.Fatalf("%d choices, %d completion tokens: %+v", len(three.Choices), three.Usage.CompletionTokens, three)
		}
		texts := map[string]bool{}
		for i, c := range three.Choices {
			alone := ask(fmt.Sprintf(`,"seed":%d`, 11+i))
			if c.Index != i || c.Message.Content != alone.Choices[0].Message.Content || three.Usage.PromptTokens != alone.Usage.PromptTokens {
				t.Fatalf("choice %d (index %d): %q; alone with seed %d: %q", i, c.Index, c.Message.Content, 11+i, alone.Choices[0].Message.Content)
			}
			texts[c.Message.Content] = true
		}
		if len(texts) < 2 {
			t.Fatalf("three choices at temperature 1.5 all read %q", three.Choices[0].Message.Content)
		}
	})
	t.Run("echo with logprobs scores the prompt", func(t *testing.T) {
		// What evaluation harnesses send to read a prompt's likelihood.
		r := s.postKey("/v1/completions", key, `{"prompt":"Once upon a time","max_tokens":2,"temperature":0,"echo":true,"logprobs":1}`)
		var c struct {
			Choices []struct {
				Text     string
				Logprobs struct {
					Tokens        []string
					TokenLogprobs []*float64       `json:"token_logprobs"`
					TopLogprobs   []map[string]any `json:"top_logprobs"`
					TextOffset    []int            `json:"text_offset"`
				}
			}
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal(r.body, &c); err != nil || r.status != http.StatusOK || len(c.Choices) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		ch := c.Choices[0]
		lp := ch.Logprobs
		n := len(lp.Tokens)
		if !strings.HasPrefix(ch.Text, "Once upon a time") || n < c.Usage.PromptTokens+1 || n > c.Usage.PromptTokens+c.Usage.CompletionTokens ||
			len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
			t.Fatalf("echo: %s", r.body)
		}
		if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
			t.Fatalf("the first prompt token is scored: %s", r.body)
		}
		for i := 1; i < n; i++ {
			if lp.TokenLogprobs[i] == nil || *lp.TokenLogprobs[i] > 0 || lp.TextOffset[i] < lp.TextOffset[i-1] {
				t.Fatalf("token %d of %s", i, r.body)
			}
		}
		if at := lp.TextOffset[c.Usage.PromptTokens]; at != len("Once upon a time") {
			t.Fatalf("the answer's first token starts at character %d, want %d, after the prompt", at, len("Once upon a time"))
		}
		plain := decodeAs[chatCompletion](t, s.postKey("/v1/completions", key, `{"prompt":"Once upon a time","max_tokens":2,"temperature":0}`))
		if ch.Text != "Once upon a time"+plain.Choices[0].Text {
			t.Fatalf("echoed %q, answered alone %q", ch.Text, plain.Choices[0].Text)
		}
	})
	t.Run("models", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.api.URL+"/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw struct {
			Object string           `json:"object"`
			Data   []map[string]any `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || raw.Object != "list" || len(raw.Data) != 1 || raw.Data[0]["id"] != model ||
			raw.Data[0]["object"] != "model" || raw.Data[0]["owned_by"] != "genq" || raw.Data[0]["created"].(float64) < 1e9 {
			t.Fatalf("%d %+v", resp.StatusCode, raw)
		}
		get := func(path string) response {
			req, _ := http.NewRequest(http.MethodGet, s.api.URL+path, nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return response{status: resp.StatusCode, header: resp.Header, body: body}
		}
		one := get("/v1/models/" + model)
		var m map[string]any
		if err := json.Unmarshal(one.body, &m); err != nil || one.status != 200 || m["id"] != model || m["created"] != raw.Data[0]["created"] {
			t.Fatalf("GET /v1/models/%s: %d %s", model, one.status, one.body)
		}
		missing := get("/v1/models/org/none")
		if e := decodeAs[v1Err](t, missing); missing.status != 404 || !strings.Contains(e.Error.Message, `the model "org/none" does not exist`) {
			t.Fatalf("a model not served: %d %s", missing.status, missing.body)
		}
	})

	for _, tt := range []struct {
		name, path, key, body string
		status                int
		typ, message          string
	}{
		{"no key", "/v1/chat/completions", "", `{"messages":[{"role":"user","content":"x"}]}`, 401, "authentication_error", "API key"},
		{"wrong key", "/v1/completions", "sk-wrong", `{"prompt":"x"}`, 401, "authentication_error", "API key"},
		{"n over 8", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"n":9}`, 400, "invalid_request_error", "n must be between 1 and 8, not 9"},
		{"n zero", "/v1/completions", key, `{"prompt":"x","n":0}`, 400, "invalid_request_error", "n must be between 1 and 8, not 0"},
		{"temperature out of range", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"temperature":3}`, 400, "invalid_request_error", "temperature must be between 0 and 2"},
		{"max_tokens zero", "/v1/completions", key, `{"prompt":"x","max_tokens":0}`, 400, "invalid_request_error", "max_tokens must be at least 1"},
		{"unknown role", "/v1/chat/completions", key, `{"messages":[{"role":"function","content":"x"}]}`, 400, "invalid_request_error", `role "function"`},
		{"no messages", "/v1/chat/completions", key, `{"model":"m"}`, 400, "invalid_request_error", "messages is required"},
		{"image part", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "invalid_request_error", "only text parts"},
		{"wrong type", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, 400, "invalid_request_error", "temperature must be a number, not string"},
		{"wrong type of object", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"stream_options":[]}`, 400, "invalid_request_error", "stream_options must be an object, not array"},
		{"penalty out of range", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"presence_penalty":-2.5}`, 400, "invalid_request_error", "presence_penalty must be between -2 and 2"},
		{"repetition_penalty 0", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"repetition_penalty":0}`, 400, "invalid_request_error", "repetition_penalty must be above 0"},
		{"bias out of range", "/v1/completions", key, `{"prompt":"x","logit_bias":{"7":-101}}`, 400, "invalid_request_error", "logit_bias for token 7 must be between -100 and 100"},
		{"bias key not a token id", "/v1/completions", key, `{"prompt":"x","logit_bias":{"a":1}}`, 400, "invalid_request_error", `logit_bias names "a"`},
		{"bias not an object", "/v1/completions", key, `{"prompt":"x","logit_bias":[1]}`, 400, "invalid_request_error", "logit_bias must map token ids to numbers"},
		{"bias beyond the vocabulary", "/v1/completions", key, `{"prompt":"x","logit_bias":{"1000000":1}}`, 400, "invalid_request_error", "vocabulary has tokens 0 to"},
		{"top_logprobs without logprobs", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, 400, "invalid_request_error", "top_logprobs needs logprobs: true"},
		{"top_logprobs over 20", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, 400, "invalid_request_error", "top_logprobs must be between 0 and 20"},
		{"completion logprobs not a count", "/v1/completions", key, `{"prompt":"x","logprobs":true}`, 400, "invalid_request_error", "logprobs must be an integer"},
		{"echo in a chat", "/v1/chat/completions", key, `{"messages":[{"role":"user","content":"x"}],"echo":true}`, 400, "invalid_request_error", "echo is for /v1/completions"},
		{"echo streamed", "/v1/completions", key, `{"prompt":"x","echo":true,"stream":true}`, 400, "invalid_request_error", "echo with stream: true is not supported"},
		{"best_of", "/v1/completions", key, `{"prompt":"x","best_of":3}`, 400, "invalid_request_error", "best_of is 3"},
		{"suffix", "/v1/completions", key, `{"prompt":"x","suffix":"end"}`, 400, "invalid_request_error", "suffix is not supported"},
		{"stop not a string", "/v1/completions", key, `{"prompt":"x","stop":3}`, 400, "invalid_request_error", "stop must be a string or a list"},
		{"malformed JSON", "/v1/completions", key, `{"prompt":`, 400, "invalid_request_error", "not valid JSON"},
		{"no prompt", "/v1/completions", key, `{}`, 400, "invalid_request_error", "prompt is required"},
		{"token ids past the vocabulary", "/v1/completions", key, `{"prompt":[1,999999]}`, 400, "invalid_request_error", "prompt holds the token id 999999; this model's vocabulary has tokens 0 to"},
		{"a negative token id", "/v1/completions", key, `{"prompt":[[1,-2]]}`, 400, "invalid_request_error", "ids are not negative"},
		{"a token prompt of several past the vocabulary", "/v1/completions", key, `{"prompt":[[1],[2,999999]]}`, 400, "invalid_request_error", "prompt holds the token id 999999"},
		{"token ids not integers", "/v1/completions", key, `{"prompt":[1.5]}`, 400, "invalid_request_error", "a list of token ids"},
		{"unknown route", "/v1/moderations", key, `{}`, 404, "not_found_error", "no route /v1/moderations"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.postKey(tt.path, tt.key, tt.body)
			e := decodeAs[v1Err](t, r)
			if r.status != tt.status || e.Error.Type != tt.typ || !strings.Contains(e.Error.Message, tt.message) || e.Error.Code == "" ||
				strings.Contains(e.Error.Message, "v1Params") {
				t.Fatalf("%d %s; want %d %s with %q", r.status, r.body, tt.status, tt.typ, tt.message)
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, s.api.URL+"/v1/chat/completions", nil)
		req.Header.Set("Authorization", "bearer "+key) // the scheme in any case
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		r := response{status: resp.StatusCode, header: resp.Header}
		r.body, _ = io.ReadAll(resp.Body)
		if e := decodeAs[v1Err](t, r); r.status != 405 || r.header.Get("Allow") != "POST" || e.Error.Message == "" {
			t.Fatalf("%d %q %s", r.status, r.header.Get("Allow"), r.body)
		}
	})
	t.Run("generate keeps its shape", func(t *testing.T) {
		r := s.postKey("/generate", key, `{"text":"hi"}`)
		var body map[string]any
		_ = json.Unmarshal(r.body, &body)
		if _, ok := body["generated_text"]; r.status != 200 || !ok || len(body) != 1 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if r := s.postKey("/generate", "", `{"text":"hi"}`); r.status != 401 || r.errorText(t) == "" {
			t.Fatalf("%d %s", r.status, r.body)
		}
	})
}

// A v1 request waits in the queue within its deadline, as /generate does,
// and a refusal comes in OpenAI's shape.
func TestOpenAIDeadline(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{JobTimeout: 300 * time.Millisecond}})
	r := s.postKey("/v1/chat/completions", "", `{"messages":[{"role":"user","content":"x"}]}`)
	if e := decodeAs[v1Err](t, r); r.status != http.StatusGatewayTimeout || e.Error.Code != "timeout" {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

// The image variant has no chat.
func TestOpenAIImageVariant(t *testing.T) {
	s := newStack(t, stackOptions{variant: genq.VariantC})
	r := s.postKey("/v1/completions", "", `{"prompt":"x"}`)
	if e := decodeAs[v1Err](t, r); r.status != 400 || !strings.Contains(e.Error.Message, "needs a text variant") {
		t.Fatalf("%d %s", r.status, r.body)
	}
}
