package tinygguf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/test/localstack"
)

// family is what llama.cpp must make of a family's models.
type family struct {
	bos, eos string
	// specials are tokens the tokenizer must read as one token each when
	// asked to parse special tokens.
	specials []string
	// userDefined are tokens it must read as one token even in plain text
	// (Qwen's <tool_call> and <think>: user-defined, not control tokens).
	userDefined []string
	// tools: the template renders tools and tool calls.
	tools bool
	// rendered are what the template must render for testChat.
	rendered []string
}

var families = map[tinygguf.Family]family{
	tinygguf.FamilyLlama: {
		bos: "<|begin_of_text|>", eos: "<|eot_id|>",
		specials: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|python_tag|>"},
		rendered: []string{"<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>",
			"<|start_header_id|>user<|end_header_id|>\n\nThanks<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	},
	tinygguf.FamilyQwen3: {
		bos: "<|endoftext|>", eos: "<|im_end|>",
		specials:    []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|fim_prefix|>"},
		userDefined: []string{"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"},
		tools:       true,
		rendered: []string{"<|im_start|>system\nBe brief.\n\n# Tools\n", "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"",
			"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>",
			"<|im_start|>user\n<tool_response>\n{\"temp\":21}\n</tool_response><|im_end|>", "<|im_start|>assistant\n"},
	},
	tinygguf.FamilyMistral: {
		bos: "<s>", eos: "</s>",
		specials: []string{"[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]",
			"[TOOL_RESULTS]", "[/TOOL_RESULTS]", "</s>"},
		tools: true,
		rendered: []string{"[INST]What is the weather in Paris?[/INST]",
			"[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcdefghi\"}]</s>",
			"[TOOL_RESULTS]{\"content\": {\"temp\":21}, \"call_id\": \"abcdefghi\"}[/TOOL_RESULTS]",
			"[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"",
			"[/AVAILABLE_TOOLS][INST]Be brief.\n\nThanks[/INST]"},
	},
	tinygguf.FamilyGPTOSS: {
		bos: "<|startoftext|>", eos: "<|return|>",
		// llama.cpp makes the harmony format's header tokens user-defined
		// (an answer shows them), and keeps <|return|> and <|call|> as
		// control tokens that end it.
		specials:    []string{"<|call|>", "<|return|>", "<|endoftext|>"},
		userDefined: []string{"<|start|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|end|>"},
		tools:       true,
		rendered: []string{"<|start|>developer<|message|># Instructions\n\nBe brief.\n\n# Tools\n\n## functions\n\nnamespace functions {",
			"type get_weather = (_: {\"type\": \"object\"",
			"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
			"<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{\"temp\":21}<|end|>",
			"<|start|>assistant<|channel|>final<|message|>It is 21 degrees.<|end|>", "<|start|>user<|message|>Thanks<|end|><|start|>assistant"},
	},
}

// testChat has a system message, a tool call and its result, and a last
// user turn: Mistral's template wants 9-character call ids and alternating
// turns, Qwen's renders the call as <tool_call> JSON.
const testChat = `{"messages": [
	{"role": "system", "content": "Be brief."},
	{"role": "user", "content": "What is the weather in Paris?"},
	{"role": "assistant", "content": "", "tool_calls": [{"id": "abcdefghi", "type": "function",
		"function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
	{"role": "tool", "tool_call_id": "abcdefghi", "content": "{\"temp\":21}"},
	{"role": "assistant", "content": "It is 21 degrees."},
	{"role": "user", "content": "Thanks"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
	"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]}`

// TestFamiliesInLlamaCpp checks every family's models against llama.cpp
// itself. llama-server (LLAMA_SERVER; make engine-tools builds
// one) loads each tiny model in variant A's and B's weights; its tokenizer
// round-trips text and the family's special tokens at the ids the file
// gives them; it renders the embedded template for a chat with a tool call;
// it generates. Then, unless -short, llama-batched-bench (beside it) decodes
// each family's mid model with two threads and logs the speed.
//
//	LLAMA_SERVER=/path/to/llama-server go test ./internal/tinygguf -run InLlamaCpp -v
func TestFamiliesInLlamaCpp(t *testing.T) {
	bin := os.Getenv("LLAMA_SERVER")
	if bin == "" {
		t.Skip("LLAMA_SERVER names no llama-server binary: the families are checked against llama.cpp only with one (make engine-tools builds it)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("LLAMA_SERVER=%s: %v", bin, err)
	}
	for _, f := range tinygguf.Families {
		for _, v := range []genq.Variant{genq.VariantA, genq.VariantB} {
			t.Run(fmt.Sprintf("%s/%s", f, v), func(t *testing.T) {
				opts := tinygguf.OptionsFor(v, "tiny", 1)
				opts.Family = f
				checkServer(t, bin, opts, families[f])
			})
		}
	}
	if testing.Short() {
		return
	}
	bench := filepath.Join(filepath.Dir(bin), "llama-batched-bench")
	if _, err := os.Stat(bench); err != nil {
		t.Fatalf("no llama-batched-bench beside LLAMA_SERVER: %v", err)
	}
	for _, f := range tinygguf.Families {
		t.Run(string(f)+"/mid", func(t *testing.T) {
			opts := tinygguf.OptionsFor(genq.VariantB, "mid", 1)
			opts.Family = f
			batchedBench(t, bench, opts)
		})
	}
}

func checkServer(t *testing.T, bin string, opts tinygguf.Options, want family) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	if err := tinygguf.Write(path, opts); err != nil {
		t.Fatal(err)
	}
	ids := tokenIDs(t, path)
	port, err := localstack.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := localstack.Start("llama-server", bin, []string{"--jinja", "-m", path, "--host", "127.0.0.1",
		"--port", strconv.Itoa(port), "-t", "1", "-c", "1024", "-np", "1"}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := localstack.WaitHTTP(ctx, url+"/health"); err != nil {
		t.Fatalf("llama-server did not load the model: %v\n%s", err, p.Log())
	}
	post := func(endpoint string, body, out any) {
		t.Helper()
		b, ok := body.([]byte)
		if !ok {
			b, _ = json.Marshal(body)
		}
		resp, err := http.Post(url+endpoint, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw bytes.Buffer
		raw.ReadFrom(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s: %s", endpoint, resp.Status, raw.String())
		}
		if err := json.Unmarshal(raw.Bytes(), out); err != nil {
			t.Fatalf("%s: %v: %s", endpoint, err, raw.String())
		}
	}

	// The server takes the file's tokens and template as the family's.
	var props struct {
		BOS  string `json:"bos_token"`
		EOS  string `json:"eos_token"`
		Tmpl string `json:"chat_template"`
		Caps struct {
			Tools bool `json:"supports_tool_calls"`
		} `json:"chat_template_caps"`
	}
	resp, err := http.Get(url + "/props")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&props)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if props.BOS != want.bos || props.EOS != want.eos || props.Caps.Tools != want.tools {
		t.Errorf("bos %q, eos %q, tool calls %v; want %q, %q, %v", props.BOS, props.EOS, props.Caps.Tools, want.bos, want.eos, want.tools)
	}

	// Text round-trips through the tokenizer, special tokens included, and
	// each special token is one token, at the file's id.
	tokenize := func(text string, special bool) []int {
		var r struct {
			Tokens []int `json:"tokens"`
		}
		post("/tokenize", map[string]any{"content": text, "parse_special": special, "add_special": false}, &r)
		return r.Tokens
	}
	detokenize := func(tokens []int) string {
		var r struct {
			Content string `json:"content"`
		}
		post("/detokenize", map[string]any{"tokens": tokens}, &r)
		return r.Content
	}
	plain := "Hello there, world!\n\nnaïve café, 東京, 🙂 and\ttabs  and 1234567 numbers."
	if got := detokenize(tokenize(plain, false)); got != plain {
		t.Errorf("plain text came back as %q", got)
	}
	for _, s := range append(slices.Clone(want.specials), want.userDefined...) {
		text := "a" + s + "b"
		toks := tokenize(text, true)
		if !slices.Contains(toks, ids[s]) {
			t.Errorf("%s: %q tokenizes to %v, without its id %d", s, text, toks, ids[s])
		}
		if got := detokenize(toks); got != text {
			t.Errorf("%s: %q came back as %q", s, text, got)
		}
	}
	for _, s := range want.specials {
		if slices.Contains(tokenize(s, false), ids[s]) {
			t.Errorf("%s: read as the special token in plain text", s)
		}
	}
	for _, s := range want.userDefined {
		if toks := tokenize(s, false); !slices.Equal(toks, []int{ids[s]}) {
			t.Errorf("%s: plain text tokenizes to %v, want its id %d alone", s, toks, ids[s])
		}
	}

	// The embedded template renders a chat with a tool call, and its
	// markers are special tokens.
	var rendered struct {
		Prompt string `json:"prompt"`
	}
	post("/apply-template", []byte(testChat), &rendered)
	for _, s := range want.rendered {
		if !strings.Contains(rendered.Prompt, s) {
			t.Errorf("the rendered chat lacks %q:\n%s", s, rendered.Prompt)
		}
	}
	toks := tokenize(rendered.Prompt, true)
	for _, s := range want.specials[:2] {
		if n, m := strings.Count(rendered.Prompt, s), count(toks, ids[s]); n != m {
			t.Errorf("%s appears %d times in the rendered chat, its token %d times", s, n, m)
		}
	}

	// It generates: greedy, the same tokens twice, with finite log-probs.
	complete := func() []int {
		var r struct {
			Predicted int   `json:"tokens_predicted"`
			Tokens    []int `json:"tokens"`
			Probs     []struct {
				Logprob float64 `json:"logprob"`
			} `json:"completion_probabilities"`
		}
		post("/completion", map[string]any{"prompt": rendered.Prompt, "n_predict": 16, "temperature": 0,
			"ignore_eos": true, "return_tokens": true, "n_probs": 2, "cache_prompt": false}, &r)
		// Random bytes are seldom whole UTF-8: the server gives one
		// probability entry per piece of text it could send, not per token.
		if r.Predicted != 16 || len(r.Tokens) != 16 || len(r.Probs) == 0 {
			t.Fatalf("%d tokens predicted (%d returned, %d with probabilities), want 16", r.Predicted, len(r.Tokens), len(r.Probs))
		}
		for i, pr := range r.Probs {
			if math.IsNaN(pr.Logprob) || pr.Logprob > 0 {
				t.Fatalf("token %d has log-probability %v", i, pr.Logprob)
			}
		}
		return r.Tokens
	}
	if a, b := complete(), complete(); !slices.Equal(a, b) {
		t.Errorf("greedy decoding gave %v, then %v", a, b)
	}
	if t.Failed() {
		t.Logf("llama-server's log:\n%s", p.Log())
	}
}

// tokenIDs maps the tokens of the model at path to their ids.
func tokenIDs(t *testing.T, path string) map[string]int {
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for i, tok := range f.Value("tokenizer.ggml.tokens").([]string) {
		ids[tok] = i
	}
	return ids
}

func count(s []int, x int) int {
	n := 0
	for _, v := range s {
		if v == x {
			n++
		}
	}
	return n
}

// batchedBench decodes the model of opts with llama-batched-bench on two
// threads: a 128-token prompt, then 64 tokens, one sequence and four. The
// verdict is the tool's exit status: it exits 1 as soon as any llama_decode
// fails, so 0 says every step of both runs decoded. Its result rows only
// report speed: llama.cpp's logger is never torn down (llama.cpp#22273, for
// #22142), so a row still queued in the logger's thread when the tool exits
// is lost, as the last one was on a busy CI machine.
func batchedBench(t *testing.T, bench string, opts tinygguf.Options) {
	path := filepath.Join(t.TempDir(), "mid.gguf")
	if err := tinygguf.Write(path, opts); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bench, "-m", path, "-c", "2048", "-npp", "128", "-ntg", "64", "-npl", "1,4",
		"-t", "2", "--output-format", "jsonl")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("llama-batched-bench: %v\n%s", err, stderr.String())
	}
	seen := map[int]bool{}
	for _, line := range strings.Split(out.String(), "\n") {
		var r struct {
			PL      int     `json:"pl"`
			SpeedPP float64 `json:"speed_pp"`
			SpeedTG float64 `json:"speed_tg"`
		}
		if json.Unmarshal([]byte(line), &r) != nil || r.PL == 0 {
			continue
		}
		seen[r.PL] = true
		if r.SpeedTG <= 0 || r.SpeedPP <= 0 {
			t.Errorf("%d sequences: prefill %.1f tok/s, decode %.1f tok/s", r.PL, r.SpeedPP, r.SpeedTG)
		}
		t.Logf("%s mid (%s), %d sequences: prefill %.1f tok/s, decode %.1f tok/s", opts.Family, opts.Weights, r.PL, r.SpeedPP, r.SpeedTG)
	}
	for _, pl := range []int{1, 4} {
		if !seen[pl] {
			t.Logf("%s mid: no speed row for %d sequences (lost in llama.cpp's logger at exit); it decoded, the tool exited 0", opts.Family, pl)
		}
	}
}
