package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/promtest"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/worker"
)

// TestPrefixCacheThroughTheAPI: a conversation's second turn, sent whole
// through /v1/chat/completions to a real worker over the tiny model,
// reports at least its first turn's prompt as cached tokens, and the
// worker's metrics count them.
func TestPrefixCacheThroughTheAPI(t *testing.T) {
	s := newStack(t, stackOptions{})
	path := filepath.Join(t.TempDir(), tinygguf.FileName(genq.VariantB, "tiny"))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: path, Slots: 2, Threads: 1, MaxNewTokens: 8, IgnoreEOS: true}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	conn, _ := openConn(t, s.ns, s.settings, s.variant)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	id := "w-" + uuid.NewString()[:8]
	rt := worker.New(worker.Config{WorkerID: id, Variant: s.variant, PollWait: 500 * time.Millisecond,
		HeartbeatEvery: 500 * time.Millisecond, DrainGrace: time.Second, RetryDelay: 100 * time.Millisecond},
		conn, b, testLog(t), reg)
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	s.waitLive(1)

	turn := func(messages []genq.Message) (string, chatUsage) {
		t.Helper()
		return s.chatTurn(t, filepath.Base(path), messages)
	}
	messages := []genq.Message{{Role: genq.RoleUser, Content: "Tell me about the sea."}}
	answer, first := turn(messages)
	messages = append(messages, genq.Message{Role: genq.RoleAssistant, Content: answer}, genq.Message{Role: genq.RoleUser, Content: "And the ships?"})
	_, second := turn(messages)
	if second.PromptTokensDetails == nil || second.PromptTokensDetails.CachedTokens < first.PromptTokens || second.PromptTokensDetails.CachedTokens >= second.PromptTokens {
		t.Fatalf("turn 2 of %d prompt tokens: details %+v, want at least turn 1's %d cached", second.PromptTokens, second.PromptTokensDetails, first.PromptTokens)
	}
	// Turn 1 comes to a fresh worker: nothing to reuse, and no details.
	if first.PromptTokensDetails != nil {
		t.Fatalf("turn 1 on a fresh worker reports cached tokens: %+v", first.PromptTokensDetails)
	}
	cached := second.PromptTokensDetails.CachedTokens
	for name, want := range map[string]float64{
		"genq_worker_prefix_cache_hit_tokens_total":  float64(cached),
		"genq_worker_prefix_cache_miss_tokens_total": float64(first.PromptTokens + second.PromptTokens - cached),
	} {
		if v := gatherValue(t, reg, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	// The scheduler files a finished sequence's cells in the cache on its
	// next pass, after the answer has gone: wait for it.
	held := gatherValue(t, reg, "genq_worker_prefix_cache_tokens")
	for deadline := time.Now().Add(5 * time.Second); held < float64(second.PromptTokens) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		held = gatherValue(t, reg, "genq_worker_prefix_cache_tokens")
	}
	if held < float64(second.PromptTokens) {
		t.Errorf("the cache holds %v tokens after a turn of %d prompt tokens", held, second.PromptTokens)
	}
}

func gatherValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, ok := promtest.Value(t, reg, name)
	if !ok {
		t.Fatalf("no %s", name)
	}
	return v
}

// chatUsage is the usage of a chat answer, with the cached tokens.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// chatTurn asks /v1/chat/completions for one answer to messages, and fails
// the test unless it is a 200 with one choice.
func (s *stack) chatTurn(t *testing.T, model string, messages []genq.Message) (string, chatUsage) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": messages})
	r := s.postKey("/v1/chat/completions", "", string(body))
	var v struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage chatUsage `json:"usage"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil || r.status != 200 || len(v.Choices) != 1 {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	return v.Choices[0].Message.Content, v.Usage
}
