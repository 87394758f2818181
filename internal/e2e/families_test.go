package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/gguf"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// TestModelFamilies serves the tiny model of each family genq writes
// (Llama 3, Qwen3, Mistral Nemo, gpt-oss: each its own architecture or
// tokenizer, chat template and tool-call format) through the API: chats, tool calls
// held to their schema in the family's own format, streamed and whole,
// (one call each: a random model may go on calling to its token limit);
// a conversation that carries an earlier call and its result back (and
// ends there: Nemo's template takes no user turn between a result and
// the answer to it), and
// an answer held to a JSON schema.
//
// The tool calls' verdict holds by construction on any CPU: with calls
// required and parallel calls off, the grammar admits exactly one call of
// bounded size (at most a newline and 16 spaces between two JSON tokens,
// a city of at most 12 characters of at most 12 bytes each, one digit),
// under 400 bytes and so under 400 tokens in any of the four formats,
// within the worker's 512. Qwen3's template lets the model think before
// it calls, and genq then opens its answer with a reasoning block of up
// to half the answer's tokens (TestReasoning has calls after one), so
// its requests here turn thinking off (reasoning_effort "none") and
// bias the <tool_call> token by +100: it is the first token drawn, and
// the grammar binds from there (the bias may put the tag's text into the
// city too, which the schema allows). gpt-oss's requests turn thinking
// off too: its prompt then closes the analysis channel empty, and the
// grammar binds the answer's header from its first byte.
func TestModelFamilies(t *testing.T) {
	for _, family := range tinygguf.Families {
		t.Run(string(family), func(t *testing.T) {
			s := newStack(t, stackOptions{})
			path := filepath.Join(t.TempDir(), tinygguf.FamilyFileName(family, genq.VariantB, "tiny"))
			opts := tinygguf.OptionsFor(genq.VariantB, "tiny", 1)
			opts.Family = family
			if err := tinygguf.Write(path, opts); err != nil {
				t.Fatal(err)
			}
			b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: path, Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 4096}, testLog(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			s.startWorkerBackend(b)
			s.waitLive(1)

			tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
				"properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},
				"required":["city","days"],"additionalProperties":false}}}]`
			switch family {
			case tinygguf.FamilyQwen3:
				tools += fmt.Sprintf(`,"logit_bias":{"%d":100},"reasoning_effort":"none"`, tokenID(t, path, "<tool_call>"))
			case tinygguf.FamilyGPTOSS:
				tools += `,"reasoning_effort":"none"`
			}
			t.Run("chat", func(t *testing.T) {
				r := s.postKey("/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":16,"seed":1}`)
				if r.status != http.StatusOK {
					t.Fatalf("%d %s", r.status, r.body)
				}
				cc := decodeAs[chatCompletion](t, r)
				if cc.Usage.CompletionTokens == 0 || cc.Usage.PromptTokens < 5 {
					t.Fatalf("usage %+v", cc.Usage)
				}
			})
			t.Run("tool calls", func(t *testing.T) {
				for seed := range 3 {
					r := s.postKey("/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Weather in Oslo?"}],`+tools+
						`,"tool_choice":"required","parallel_tool_calls":false,"temperature":1,"seed":`+string(rune('0'+seed))+`}`)
					if r.status != http.StatusOK {
						t.Fatalf("%d %s", r.status, r.body)
					}
					checkWeatherCalls(t, decodeAs[chatCompletion](t, r))
				}
			})
			t.Run("tool calls streamed", func(t *testing.T) {
				body := `{"messages":[{"role":"user","content":"Weather in Oslo?"}],` + tools + `,"tool_choice":"required","parallel_tool_calls":false,"temperature":1,"seed":5`
				whole := decodeAs[chatCompletion](t, s.postKey("/v1/chat/completions", "", body+`}`))
				checkWeatherCalls(t, whole)
				calls := streamedCalls(t, s, body+`,"stream":true}`)
				want := whole.Choices[0].Message.ToolCalls
				if len(calls) != len(want) {
					t.Fatalf("streamed %d calls, whole %d", len(calls), len(want))
				}
				for i := range want {
					if calls[i].name != want[i].Function.Name || calls[i].args.String() != want[i].Function.Arguments {
						t.Errorf("call %d streamed %s(%s), whole %s(%s)", i, calls[i].name, calls[i].args.String(), want[i].Function.Name, want[i].Function.Arguments)
					}
				}
			})
			t.Run("calls and results carried back", func(t *testing.T) {
				r := s.postKey("/v1/chat/completions", "", `{"messages":[{"role":"user","content":"Weather in Oslo?"},
					{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"days\":2}"}}]},
					{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":3}"}],`+tools+`,"max_tokens":24,"seed":2}`)
				if r.status != http.StatusOK {
					t.Fatalf("%d %s", r.status, r.body)
				}
			})
			t.Run("json schema", func(t *testing.T) {
				r := s.postKey("/v1/chat/completions", "", `{"messages":[{"role":"user","content":"A number, please."}],"temperature":1,"seed":4,
					"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":20}},"required":["n"],"additionalProperties":false}}}}`)
				if r.status != http.StatusOK {
					t.Fatalf("%d %s", r.status, r.body)
				}
				ch := decodeAs[chatCompletion](t, r).Choices[0]
				var v struct {
					N *whole `json:"n"`
				}
				if ch.FinishReason == "stop" {
					if err := json.Unmarshal([]byte(ch.Message.Content), &v); err != nil || v.N == nil || *v.N < 10 || *v.N > 20 {
						t.Fatalf("answer %q: %v", ch.Message.Content, err)
					}
				}
			})
		})
	}
}

// readGGUF reads the metadata of the GGUF model at path.
func readGGUF(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h, err := gguf.Read(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tokenID is the id of the token whose text is tok in the GGUF model at
// path.
func tokenID(t *testing.T, path, tok string) int {
	t.Helper()
	tokens, _ := readGGUF(t, path).Value("tokenizer.ggml.tokens").([]string)
	i := slices.Index(tokens, tok)
	if i < 0 {
		t.Fatalf("%s has no token %q", path, tok)
	}
	return i
}

// checkWeatherCalls holds an answer's calls to get_weather's schema.
func checkWeatherCalls(t *testing.T, cc chatCompletion) {
	t.Helper()
	ch := cc.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) == 0 || ch.Message.Content != "" {
		t.Fatalf("choice %q (%s, %d calls): want tool calls", ch.Message.Content, ch.FinishReason, len(ch.Message.ToolCalls))
	}
	for _, c := range ch.Message.ToolCalls {
		var args struct {
			City *string `json:"city"`
			Days *whole  `json:"days"`
		}
		if err := json.Unmarshal([]byte(c.Function.Arguments), &args); err != nil || c.Function.Name != "get_weather" ||
			args.City == nil || len([]rune(*args.City)) > 12 || args.Days == nil || *args.Days < 1 || *args.Days > 7 {
			t.Fatalf("call %+v does not match the tool's schema (%v)", c, err)
		}
	}
}

type streamedCall struct {
	name string
	args strings.Builder
}

// streamedCalls posts a streamed chat and joins its delta.tool_calls.
func streamedCalls(t *testing.T, s *stack, body string) []*streamedCall {
	t.Helper()
	resp, err := http.Post(s.api.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var calls []*streamedCall
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk streamChunk
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				t.Errorf("a required call streamed content %q", c.Delta.Content)
			}
			for _, tc := range c.Delta.ToolCalls {
				for len(calls) <= tc.Index {
					calls = append(calls, &streamedCall{})
				}
				calls[tc.Index].name += tc.Function.Name
				calls[tc.Index].args.WriteString(tc.Function.Arguments)
			}
		}
	}
	return calls
}

// whole is a JSON Schema integer as an answer may write it without
// strict: 4, or 4.0.
type whole float64

func (w *whole) UnmarshalJSON(b []byte) error {
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if f != math.Trunc(f) {
		return fmt.Errorf("%s is not an integer", b)
	}
	*w = whole(f)
	return nil
}
