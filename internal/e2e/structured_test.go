package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/structured/ajvtest"
	"github.com/genq/genq/internal/textgen"
)

// Requests whose response_format or tools no answer could be held to are
// 400s in OpenAI's shape that say what is wrong, and none reaches a
// worker: the api compiles every schema before it queues the job.
func TestStructuredBadInput(t *testing.T) {
	s := newStack(t, stackOptions{http: httpapi.Config{MaxV1BodyBytes: 8 << 20}})
	b := newTestBackend(2)
	s.startWorker(b, 0)
	chat := func(extra string) string { return `{"messages":[{"role":"user","content":"x"}],` + extra + `}` }
	format := func(schema string) string {
		return chat(`"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":` + schema + `,"strict":true}}`)
	}
	var big strings.Builder
	big.WriteString(`{"type":"object","properties":{`)
	for i := 0; big.Len() < 1<<20; i++ {
		fmt.Fprintf(&big, `"property_%d":{"type":"string","description":"a property of a schema over a megabyte long"},`, i)
	}
	big.WriteString(`"last":{"type":"string"}}}`)
	weather := `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}`
	for _, tc := range []struct {
		name, path, body, message string
	}{
		{"unsupported keyword", "/v1/chat/completions", format(`{"type":"array","uniqueItems":true}`), `the schema keyword "uniqueItems"`},
		{"unsatisfiable schema", "/v1/chat/completions", format(`{"enum":[]}`), "enum must be a non-empty array"},
		{"a $ref to nowhere", "/v1/chat/completions", format(`{"$ref":"#/$defs/missing"}`), `$ref "#/$defs/missing" points to nothing`},
		{"a schema over a megabyte", "/v1/chat/completions", format(big.String()), "the limit is 262144"},
		{"json_schema without a schema", "/v1/chat/completions", chat(`"response_format":{"type":"json_schema","json_schema":{"name":"a"}}`), "schema is required"},
		{"response_format of an unknown type", "/v1/chat/completions", chat(`"response_format":{"type":"xml"}`), `response_format.type "xml"`},
		{"a tool without a name", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"parameters":{"type":"object"}}}]`), "tools[0].function.name is required"},
		{"tool_choice naming an unknown function", "/v1/chat/completions", chat(`"tools":[` + weather + `],"tool_choice":{"type":"function","function":{"name":"nope"}}`), `tool_choice names function "nope"`},
		{"strict tool parameters genq cannot enforce", "/v1/chat/completions", chat(`"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"type":"object","properties":{"n":{"type":"array","not":{"uniqueItems":true}}}}}}]`),
			`tools[0].function.parameters: at #/properties/n/not: not over "uniqueItems"`},
		{"tools in a completion", "/v1/completions", `{"prompt":"x","tools":[` + weather + `]}`, "tools are for /v1/chat/completions"},
		{"a bad schema in a completion", "/v1/completions", `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"enum":[]}}}}`, "enum must be a non-empty array"},
		{"a bad schema in an asynchronous job", "/v1/jobs", `{"type":"chat.completion","request":` + format(`{"$ref":"#/$defs/none"}`) + `}`, "points to nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.postKey(tc.path, "", tc.body)
			e := decodeAs[v1Err](t, r)
			if r.status != 400 || e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("%d %.300s; want 400 with %q", r.status, r.body, tc.message)
			}
		})
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the worker", n)
	}
}

type corpusSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
}

// The schema corpus through /v1/chat/completions, on the tiny
// random-weight model at temperature 1: a random model never writes valid
// JSON by chance, so every answer that stops validates only because the
// constraint held it. ajv, a validator written apart from genq's
// compiler, checks them.
func TestStructuredCorpusOverHTTP(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "structured", "testdata", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []corpusSchema
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	const maxTokens = 400
	s := newStack(t, stackOptions{})
	s.tinyTextWorkerWith(textgen.Config{Slots: 4, Threads: 1, MaxNewTokens: maxTokens})
	type answer struct {
		text, finish string
	}
	const choices = 2 // each schema answered twice, as n asks, from seeds of their own
	answers := make([][]answer, len(corpus))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, c := range corpus {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			body, _ := json.Marshal(map[string]any{
				"messages":        []map[string]string{{"role": "user", "content": "Answer in JSON: " + c.Name}},
				"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "answer", "schema": c.Schema, "strict": true}},
				"temperature":     1, "seed": i, "max_tokens": maxTokens, "n": choices,
			})
			r := s.postKey("/v1/chat/completions", "", string(body))
			if r.status != 200 {
				t.Errorf("%s: %d %.300s", c.Name, r.status, r.body)
				return
			}
			cc := decodeAs[chatCompletion](t, r)
			for _, ch := range cc.Choices {
				answers[i] = append(answers[i], answer{ch.Message.Content, ch.FinishReason})
			}
		})
	}
	wg.Wait()
	var lines []ajvtest.Line
	var names []string
	finished, length := 0, 0
	for i, as := range answers {
		for _, a := range as {
			switch a.finish {
			case "stop":
				finished++
				lines = append(lines, ajvtest.Line{Schema: corpus[i].Schema, Answers: []string{a.text}})
				names = append(names, corpus[i].Name)
			case "length":
				length++
			default:
				t.Errorf("%s: finish_reason %q", corpus[i].Name, a.finish)
			}
		}
	}
	errs, ran := ajvtest.Check(t, lines)
	valid := 0
	for i, e := range errs {
		if e[0] != "" {
			t.Errorf("%s: ajv refuses %q: %s", names[i], lines[i].Answers[0], e[0])
			continue
		}
		valid++
	}
	if !ran {
		t.Logf("ajv not run: npm ci in test/structured")
	}
	t.Logf("%d schemas, %d answers at temperature 1: %d finished, %d valid under ajv, %d hit length (max_tokens %d)",
		len(corpus), len(corpus)*choices, finished, valid, length, maxTokens)
	// How many answers finish within max_tokens is the random model's
	// choice (where a schema leaves strings and arrays unbounded), and
	// differs from one CPU's arithmetic to another's: the test holds only
	// that some did, so that ajv checked something. Schemas with bounded
	// answers (a boolean, an enum) always finish.
	if finished == 0 {
		t.Errorf("none of %d answers finished: the run checked nothing", len(corpus)*choices)
	}
}

// Tools and schemas work the same whichever way a job comes in: a chat
// answered whole, and an asynchronous job read later. The answers are
// bounded by their grammars, so they end the same on any CPU whatever the
// random model samples: one call (calls required, parallel calls off) of
// at most a newline and 16 spaces between two JSON tokens, a city of at
// most 12 characters of at most 12 bytes each and one digit, under 400
// bytes and so under 400 tokens, within the 512 allowed; and an integer
// from 10 to 20. (With parallel calls the grammar admits any number of
// them, and a random model may run on into max_tokens.)
func TestStructuredEveryWayIn(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorkerWith(textgen.Config{Slots: 2, Threads: 1, MaxNewTokens: 512, ContextSize: 2048}) // tools make long prompts
	const tools = `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
		"properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},
		"required":["city","days"],"additionalProperties":false}}}],"tool_choice":"required","parallel_tool_calls":false,"temperature":1,"seed":3`
	chat := `{"messages":[{"role":"user","content":"Weather in Oslo?"}],` + tools + `}`
	checkCalls := func(t *testing.T, cc chatCompletion) {
		t.Helper()
		ch := cc.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.Content != "" {
			t.Fatalf("choice %+v: want one tool call", ch)
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
	t.Run("chat", func(t *testing.T) {
		r := s.postKey("/v1/chat/completions", "", chat)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		cc := decodeAs[chatCompletion](t, r)
		checkCalls(t, cc)
		if want := genq.ToolCallID(r.header.Get(httpapi.HeaderJobID), 0); cc.Choices[0].Message.ToolCalls[0].ID != want {
			t.Fatalf("the call's id is %q, want %q", cc.Choices[0].Message.ToolCalls[0].ID, want)
		}
	})
	t.Run("asynchronous job", func(t *testing.T) {
		r := s.postKey("/v1/jobs", "", `{"type":"chat.completion","request":`+chat+`}`)
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		st := s.waitJob(decodeAs[jobStatus](t, r).ID)
		if st.Status != "succeeded" || st.Result == nil {
			t.Fatalf("job %+v", st)
		}
		checkCalls(t, *st.Result)
	})
	t.Run("asynchronous job with a schema", func(t *testing.T) {
		r := s.postKey("/v1/jobs", "", `{"type":"completion","request":{"prompt":"A number:","temperature":1,"seed":4,
			"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"integer","minimum":10,"maximum":20}}}}}`)
		if r.status != 202 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		st := s.waitJob(decodeAs[jobStatus](t, r).ID)
		if st.Status != "succeeded" || st.Result == nil {
			t.Fatalf("job %+v", st)
		}
		var n whole
		ch := st.Result.Choices[0]
		if err := json.Unmarshal([]byte(ch.Text), &n); ch.FinishReason != "stop" || err != nil || n < 10 || n > 20 {
			t.Fatalf("answer %q (%s): want an integer from 10 to 20", ch.Text, ch.FinishReason)
		}
	})
}
