package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// GenerateStream makes the test backend a streamer: a chat whose last
// message is "count:<n>:<ms>" streams "t1 ", "t2 ", … every ms; "crash"
// streams one piece and then waits to be cut off. Anything else is
// Generate's.
func (b *testBackend) GenerateStream(ctx context.Context, job genq.Job, progress func(genq.Progress), emit func(genq.TextPiece)) (genq.Result, error) {
	if len(job.Messages) == 0 {
		return b.Generate(ctx, job, progress)
	}
	b.calls.Add(1)
	b.started <- job.ID
	cmd := strings.Split(job.Messages[len(job.Messages)-1].Content, ":")
	if cmd[0] == "crash" {
		emit(genq.TextPiece{Text: fmt.Sprintf("attempt %d ", job.Attempt)})
		<-ctx.Done()
		b.ended <- job.ID
		return genq.Result{}, ctx.Err()
	}
	n, _ := strconv.Atoi(cmd[1])
	ms, _ := strconv.Atoi(cmd[2])
	var text strings.Builder
	for i := 1; i <= n; i++ {
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-ctx.Done():
			b.ended <- job.ID
			return genq.Result{}, ctx.Err()
		}
		piece := fmt.Sprintf("t%d ", i)
		text.WriteString(piece)
		emit(genq.TextPiece{Text: piece})
	}
	return genq.NewDetailedTextResult(text.String(), genq.FinishLength, genq.Usage{PromptTokens: 1, CompletionTokens: n}, nil), nil
}

// sseEvent is one data event and when it arrived.
type sseEvent struct {
	data string
	at   time.Time
}

// streamChunk is a chunk of a streamed chat or completion, with what the
// tests read of it.
type streamChunk struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role             string `json:"role"`
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			ToolCalls        []struct {
				Index    int `json:"index"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// stream posts body and reads its events until the stream ends or stop
// says so after an event.
func (s *stack) stream(ctx context.Context, path, body string, stop func([]sseEvent) bool) (*http.Response, []sseEvent) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.api.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var events []sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, sseEvent{data: data, at: time.Now()})
			if stop != nil && stop(events) {
				break
			}
		}
	}
	return resp, events
}

// streamed joins the text of a stream's chunks, and returns its last
// finish reason, its usage's completion tokens and its error code.
func streamed(t *testing.T, events []sseEvent) (text, finish string, tokens int, errCode string, done bool) {
	t.Helper()
	for _, e := range events {
		if e.data == "[DONE]" {
			done = true
			continue
		}
		var c streamChunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("event %q: %v", e.data, err)
		}
		if c.Error != nil {
			errCode = c.Error.Code
		}
		if c.Usage != nil {
			tokens = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			text += ch.Delta.Content + ch.Text
			if finish != "" {
				t.Errorf("a choice after the one that finished: %q", e.data)
			}
			if ch.FinishReason != nil {
				// OpenAI sends null until the last chunk; strict clients
				// reject an empty string.
				if *ch.FinishReason == "" {
					t.Errorf("finish_reason is an empty string, not null: %q", e.data)
				}
				finish = *ch.FinishReason
			}
		}
	}
	return
}

// A stream of the tiny model says, chunk by chunk, exactly what the same
// request says whole, and its first chunk comes well before its last.
func TestOpenAIStream(t *testing.T) {
	s := newStack(t, stackOptions{})
	model := s.tinyTextWorker(64)
	tests := []struct{ path, input, object string }{
		{"/v1/chat/completions", `"messages":[{"role":"user","content":"Tell me a long story."}]`, "chat.completion.chunk"},
		{"/v1/completions", `"prompt":"Once upon a time"`, "text_completion"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			params := `"temperature":0,"seed":7,"max_tokens":64,` + tt.input
			whole := decodeAs[chatCompletion](t, s.postKey(tt.path, "", "{"+params+"}"))
			want := whole.Choices[0].Message.Content + whole.Choices[0].Text
			resp, events := s.stream(context.Background(), tt.path,
				`{"stream":true,"stream_options":{"include_usage":true},`+params+`}`, nil)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("Content-Type %q", ct)
			}
			text, finish, tokens, errCode, done := streamed(t, events)
			if text != want || finish != genq.FinishLength || tokens != 64 || errCode != "" || !done {
				t.Fatalf("streamed %q (finish %q, %d tokens, error %q, done %v), want %q (length, 64)", text, finish, tokens, errCode, done, want)
			}
			var first streamChunk
			_ = json.Unmarshal([]byte(events[0].data), &first)
			if first.Object != tt.object || first.Model != model {
				t.Errorf("object %q of model %q, want %q of %q", first.Object, first.Model, tt.object, model)
			}
			if len(events) < 8 || !events[0].at.Before(events[len(events)-1].at) {
				t.Errorf("%d events, the first at %v, the last at %v: not streamed as sampled", len(events), events[0].at, events[len(events)-1].at)
			}
		})
	}
	// n choices stream side by side, each its own index: each joins into
	// what the same request answers whole.
	choices := `"temperature":1.5,"seed":3,"max_tokens":10,"n":2,"messages":[{"role":"user","content":"Hi."}]`
	wholeN := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", "", "{"+choices+"}"))
	_, events := s.stream(context.Background(), "/v1/chat/completions", `{"stream":true,"stream_options":{"include_usage":true},`+choices+`}`, nil)
	joined, finished, tokens := map[int]string{}, map[int]int{}, 0
	for _, e := range events {
		var c struct {
			Choices []struct {
				Index        int
				Delta        struct{ Content string }
				FinishReason *string `json:"finish_reason"`
			}
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if e.data == "[DONE]" || json.Unmarshal([]byte(e.data), &c) != nil {
			continue
		}
		for _, ch := range c.Choices {
			joined[ch.Index] += ch.Delta.Content
			if ch.FinishReason != nil {
				finished[ch.Index]++
			}
		}
		if c.Usage != nil {
			tokens = c.Usage.CompletionTokens
		}
	}
	if len(wholeN.Choices) != 2 || tokens != 20 || finished[0] != 1 || finished[1] != 1 {
		t.Fatalf("n=2: %d whole choices, %d streamed tokens, finishes %v", len(wholeN.Choices), tokens, finished)
	}
	for i, c := range wholeN.Choices {
		if joined[i] != c.Message.Content {
			t.Errorf("choice %d streamed %q, whole %q", i, joined[i], c.Message.Content)
		}
	}

	// Log-probabilities come with the text of their tokens, chunk by chunk,
	// and join into the whole answer's.
	logprobs := `"temperature":0,"max_tokens":12,"logprobs":true,"top_logprobs":2,"messages":[{"role":"user","content":"Hi."}]`
	whole := s.postKey("/v1/chat/completions", "", "{"+logprobs+"}")
	type entries struct {
		Content []json.RawMessage
	}
	var wholeBody struct {
		Choices []struct{ Logprobs entries }
	}
	if err := json.Unmarshal(whole.body, &wholeBody); err != nil || len(wholeBody.Choices) != 1 || len(wholeBody.Choices[0].Logprobs.Content) == 0 {
		t.Fatalf("%d %s", whole.status, whole.body)
	}
	_, events = s.stream(context.Background(), "/v1/chat/completions", `{"stream":true,`+logprobs+`}`, nil)
	var streamedEntries []json.RawMessage
	carrying := 0
	for _, e := range events {
		var c struct {
			Choices []struct {
				Delta        struct{ Content string }
				Logprobs     *entries
				FinishReason *string `json:"finish_reason"`
			}
		}
		if json.Unmarshal([]byte(e.data), &c) != nil || len(c.Choices) != 1 {
			continue
		}
		ch := c.Choices[0]
		switch {
		case ch.FinishReason != nil && ch.Logprobs != nil:
			t.Errorf("the finishing choice carries logprobs: %s", e.data)
		case ch.FinishReason == nil && ch.Logprobs == nil:
			t.Errorf("a chunk of a job that asked for logprobs has none: %s", e.data)
		case ch.Logprobs != nil:
			streamedEntries = append(streamedEntries, ch.Logprobs.Content...)
			if len(ch.Logprobs.Content) > 0 {
				carrying++
			}
		}
	}
	want := wholeBody.Choices[0].Logprobs.Content
	if len(streamedEntries) != len(want) || carrying < 2 {
		t.Fatalf("%d entries over %d chunks streamed, want %d over several", len(streamedEntries), carrying, len(want))
	}
	for i := range want {
		if string(streamedEntries[i]) != string(want[i]) {
			t.Fatalf("entry %d streamed %s, whole %s", i, streamedEntries[i], want[i])
		}
	}
}

// A client that leaves a stream cancels its job: the backend's run ends
// within a second.
func TestOpenAIStreamDisconnect(t *testing.T) {
	s := newStack(t, stackOptions{})
	b := newTestBackend(1)
	s.startWorker(b, time.Second)
	s.waitLive(1)
	ctx, cancel := context.WithCancel(context.Background())
	_, events := s.stream(ctx, "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"count:1000:20"}]}`,
		func([]sseEvent) bool { return true })
	cancel()
	left := time.Now()
	if len(events) != 1 {
		t.Fatalf("%d events before leaving", len(events))
	}
	waitFor(t, b.ended, time.Second, "the run to end after its client left")
	t.Logf("slot freed %v after the client left", time.Since(left))
}

// A worker that dies after some text was forwarded: its job runs again,
// and the stream ends with an error event rather than repeating the text
// or stopping short without a word.
func TestOpenAIStreamRedelivery(t *testing.T) {
	s := newStack(t, stackOptions{})
	b1 := newTestBackend(1)
	w1 := s.startWorker(b1, time.Second)
	s.waitLive(1)
	go func() {
		waitFor(t, b1.started, 5*time.Second, "the first run")
		time.Sleep(100 * time.Millisecond)
		w1.crash()
		s.startWorker(newTestBackend(1), time.Second)
	}()
	resp, events := s.stream(context.Background(), "/v1/chat/completions", `{"stream":true,"messages":[{"role":"user","content":"crash"}]}`, nil)
	text, _, _, errCode, done := streamed(t, events)
	if resp.StatusCode != http.StatusOK || text != "attempt 1 " || errCode != string(genq.Unavailable) || done {
		t.Fatalf("status %d, text %q, error %q, done %v: want the first run's text, then an unavailable error event", resp.StatusCode, text, errCode, done)
	}
}
