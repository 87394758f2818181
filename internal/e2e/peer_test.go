package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// llamaServer is the peer binary ($LLAMA_SERVER, which make test sets to
// the engine build's). Without it the test is skipped, unless
// GENQ_REQUIRE_PEER=1 (make test), where that is a failure.
func llamaServer(t *testing.T) string {
	t.Helper()
	return peerBinary(t, "LLAMA_SERVER", "llama-server", "make engine-tools")
}

// peerBinary is the binary env names, or the test's skip (its failure
// under GENQ_REQUIRE_PEER=1) saying that target builds it.
func peerBinary(t *testing.T, env, what, target string) string {
	t.Helper()
	bin := os.Getenv(env)
	if bin != "" {
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
	}
	msg := fmt.Sprintf("%s not found (%s=%q): %s builds it", what, env, bin, target)
	if os.Getenv("GENQ_REQUIRE_PEER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestAnswersMatchLlamaServer: genq and llama.cpp's own server, built from
// the same pinned sources, answer the same chats on the same mid-size
// model alike at temperature 0: the 64 tokens' bytes are the same, and the
// log-probabilities and the five most likely alternatives agree within
// 1e-3. genq runs as it ships (the shared system prefix and the prefix
// cache on), and so does llama-server (its prompt cache on): each chat is
// asked twice, so that the second answer of each comes from the cells its
// first left.
//
// llama-server gives an entry per piece of text it sends, and a random
// model's tokens are often pieces of UTF-8 characters, which it holds back
// and sends with the next token: its entry then has the bytes of both and
// the log-probabilities of the last. genq gives an entry per token, so the
// comparison walks genq's entries until their bytes make up the peer's
// entry, and holds the last of them to it.
func TestAnswersMatchLlamaServer(t *testing.T) {
	bin := llamaServer(t)
	model := filepath.Join(t.TempDir(), tinygguf.FileName(genq.VariantB, "mid"))
	if err := tinygguf.Write(model, tinygguf.OptionsFor(genq.VariantB, "mid", 1)); err != nil {
		t.Fatal(err)
	}
	const tokens, threads = 64, 2
	peer := startLlamaServer(t, bin, model, "-t", strconv.Itoa(threads), "-tb", strconv.Itoa(threads), "-np", "1", "-c", "2048")

	// A mid-size model on a shared 2-core machine: give each job time.
	s := newStack(t, stackOptions{variant: genq.VariantB, http: httpapi.Config{JobTimeout: 3 * time.Minute}})
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: model, Slots: 2, Threads: threads,
		ContextSize: 2048, MaxNewTokens: tokens}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s.startWorkerBackend(b)
	s.waitLive(1)

	chats := [][]map[string]string{
		{{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Write a haiku about queues."}},
		{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the capital of France? ¿Y de España?"},
			{"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Japan?"}},
	}
	// End-of-turn tokens are banned, so that every answer runs its 64
	// tokens: llama-server's ignore_eos bans them, genq's samples them and
	// goes on (as vLLM's), which would part the texts.
	bias := map[string]float64{}
	for _, id := range peerTokenize(t, peer, "<|eot_id|><|end_of_text|><|eom_id|>") {
		bias[strconv.Itoa(id)] = -100
	}
	for i, msgs := range chats {
		body, _ := json.Marshal(map[string]any{"model": "mid", "messages": msgs, "max_tokens": tokens, "temperature": 0,
			"logit_bias": bias, "logprobs": true, "top_logprobs": 5})
		for round := range 2 {
			want, n := chatLogprobs(t, peer+"/v1/chat/completions", body)
			if n != tokens {
				t.Errorf("chat %d, round %d: llama-server answered %d tokens, want %d", i, round, n, tokens)
			}
			got, n := chatLogprobs(t, s.api.URL+"/v1/chat/completions", body)
			if n != tokens {
				t.Errorf("chat %d, round %d: genq answered %d tokens, want %d", i, round, n, tokens)
			}
			compareLogprobs(t, fmt.Sprintf("chat %d, round %d", i, round), got, want)
		}
	}
}

type tokenLogprob struct {
	Token       string  `json:"token"`
	Bytes       []byte  `json:"bytes"`
	Logprob     float64 `json:"logprob"`
	TopLogprobs []struct {
		Token   string  `json:"token"`
		Bytes   []byte  `json:"bytes"`
		Logprob float64 `json:"logprob"`
	} `json:"top_logprobs"`
}

// UnmarshalJSON reads bytes as the list of numbers OpenAI writes.
func (l *tokenLogprob) UnmarshalJSON(data []byte) error {
	type plain tokenLogprob
	var raw struct {
		plain
		Bytes       []int `json:"bytes"`
		TopLogprobs []struct {
			Token   string  `json:"token"`
			Bytes   []int   `json:"bytes"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*l = tokenLogprob(raw.plain)
	l.Bytes = ints(raw.Bytes)
	l.TopLogprobs = l.TopLogprobs[:0]
	for _, a := range raw.TopLogprobs {
		l.TopLogprobs = append(l.TopLogprobs, struct {
			Token   string  `json:"token"`
			Bytes   []byte  `json:"bytes"`
			Logprob float64 `json:"logprob"`
		}{a.Token, ints(a.Bytes), a.Logprob})
	}
	return nil
}

func ints(xs []int) []byte {
	b := make([]byte, len(xs))
	for i, x := range xs {
		b[i] = byte(x)
	}
	return b
}

// chatLogprobs posts a chat completion and returns its tokens' entries and
// how many tokens it generated.
func chatLogprobs(t *testing.T, url string, body []byte) ([]tokenLogprob, int) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Logprobs struct {
				Content []tokenLogprob `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("%s: %v (%d choices)", url, err, len(out.Choices))
	}
	return out.Choices[0].Logprobs.Content, out.Usage.CompletionTokens
}

// compareLogprobs holds genq's entries (one per token) to llama-server's
// (one per piece of text, the last token's log-probabilities): the same
// bytes, and log-probabilities within 1e-3, the alternatives' too.
func compareLogprobs(t *testing.T, what string, got, want []tokenLogprob) {
	t.Helper()
	const tolerance = 1e-3
	g := 0
	for i, w := range want {
		if len(w.Bytes) == 0 {
			continue // a special token: no text, and genq gives chats no entry for it
		}
		var piece []byte
		last := -1
		for g < len(got) && len(piece) < len(w.Bytes) {
			piece = append(piece, got[g].Bytes...)
			last, g = g, g+1
		}
		if !bytes.Equal(piece, w.Bytes) {
			t.Errorf("%s: llama-server's piece %d is %q (bytes %v); genq's tokens from there give %q", what, i, w.Token, w.Bytes, piece)
			return // the rest follows a different text
		}
		e := got[last]
		if d := math.Abs(e.Logprob - w.Logprob); d > tolerance {
			t.Errorf("%s: token %d (%q): logprob %.5f, llama-server %.5f", what, last, e.Bytes, e.Logprob, w.Logprob)
		}
		if len(e.TopLogprobs) != len(w.TopLogprobs) {
			t.Errorf("%s: token %d: %d alternatives, llama-server %d", what, last, len(e.TopLogprobs), len(w.TopLogprobs))
			continue
		}
		for j, a := range e.TopLogprobs {
			b := w.TopLogprobs[j]
			if !bytes.Equal(a.Bytes, b.Bytes) && math.Abs(a.Logprob-b.Logprob) > tolerance {
				t.Errorf("%s: token %d, alternative %d: %q %.5f, llama-server %q %.5f", what, last, j, a.Bytes, a.Logprob, b.Bytes, b.Logprob)
			}
			if d := math.Abs(a.Logprob - b.Logprob); d > tolerance {
				t.Errorf("%s: token %d, alternative %d (%q): logprob %.5f, llama-server %.5f", what, last, j, a.Bytes, a.Logprob, b.Logprob)
			}
		}
	}
	if g != len(got) {
		t.Errorf("%s: genq has %d tokens past the end of llama-server's answer", what, len(got)-g)
	}
}

// peerTokenize is llama-server's tokenization of text, special tokens read
// as such.
func peerTokenize(t *testing.T, url, text string) []int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"content": text, "parse_special": true})
	resp, err := http.Post(url+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Tokens []int `json:"tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Tokens) == 0 {
		t.Fatalf("tokenize %q: %v %v", text, err, out.Tokens)
	}
	return out.Tokens
}

// startLlamaServer runs llama-server on model with args and returns its
// base URL once it is healthy; it stops with the test.
func startLlamaServer(t *testing.T, bin, model string, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log bytes.Buffer
	cmd := exec.Command(bin, append([]string{"-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = &log, &log
	// It dies with the test binary, even one that panics past its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server did not come up: %v\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
