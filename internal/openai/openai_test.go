package openai

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

func TestRequireKind(t *testing.T) {
	for _, tt := range []struct {
		v    genq.Variant
		want genq.OutputKind
		what string
		hint string
		msg  string // "" when allowed
	}{
		{genq.VariantB, genq.OutputText, "/v1/completions", "", ""},
		{genq.VariantC, genq.OutputImage, "type image", "", ""},
		{genq.VariantC, genq.OutputText, "/v1/completions", "; use POST /generate",
			"variant C makes images: /v1/completions needs a text variant (A or B); use POST /generate"},
		{genq.VariantB, genq.OutputImage, "type image", "", "variant B makes text: type image needs the image variant (C)"},
	} {
		err := RequireKind(tt.v, tt.want, tt.what, tt.hint)
		if tt.msg == "" {
			if err != nil {
				t.Errorf("RequireKind(%s, %s) = %v, want nil", tt.v, tt.want, err)
			}
			continue
		}
		if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
			t.Errorf("RequireKind(%s, %s) = %v, want %q", tt.v, tt.want, err, tt.msg)
		}
	}
}

func TestDecodeRefusals(t *testing.T) {
	for _, tt := range []struct {
		name, body, msg string
		chat            bool
	}{
		{"empty", ``, "request body is not valid JSON: unexpected end of input", true},
		{"list", `[]`, "request body must be a JSON object", true},
		{"embedded field type", `{"prompt":"x","temperature":"hot"}`, "temperature must be a number, not string", false},
		{"echo in a chat", `{"messages":[{"role":"user","content":"hi"}],"echo":true}`,
			"echo is for /v1/completions: a chat answer does not repeat its messages", true},
		{"no messages", `{"messages":[]}`, "messages is required: a list of {role, content}", true},
		{"image part", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
			`messages[0].content has a part of type "image_url": only text parts are supported`, true},
		{"two prompts, asynchronous", `{"prompt":["a","b"]}`, "prompt holds 2 prompts: an asynchronous job answers one; submit one job per prompt", false},
		{"an empty prompt of several", `{"prompt":["a",""]}`, "prompt[1] is required", false},
		{"a long prompt of several", `{"prompt":["a","0123456789"]}`, "prompt[1] is 10 bytes long; the limit is 8", false},
		{"no prompt in the list", `{"prompt":[]}`, "prompt is required", false},
		{"prompts of mixed kinds", `{"prompt":["a",[1]]}`, "prompt must be a string, a list of strings, a list of token ids (integers from 0), or a list of such lists", false},
		{"max_tokens 0 without echo", `{"prompt":"x","max_tokens":0}`, "max_tokens must be at least 1, not 0 (0 is for scoring a prompt, with echo: true)", false},
		{"long prompt", `{"prompt":"0123456789"}`, "prompt is 10 bytes long; the limit is 8", false},
		{"n too big", `{"prompt":"x","n":9}`, "n must be between 1 and 8, not 9", false},
		{"logit_bias key", `{"prompt":"x","logit_bias":{"a":1}}`, `logit_bias names "a": keys are token ids, as "1234"`, false},
		{"tools in a completion", `{"prompt":"x","tools":[{}]}`,
			"tools are for /v1/chat/completions: a completion continues its prompt; use response_format to hold it to JSON", false},
		{"functions", `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`,
			"functions and function_call are the deprecated form of tools: send tools and tool_choice", true},
		{"tool_choice of an unknown mode", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"always"}`,
			`tool_choice "always" is not one of "none", "auto" and "required", nor a function`, true},
		{"tool turn without its call", `{"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"42"}]}`,
			"messages[1]: a tool's message needs tool_call_id", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			decode := DecodeCompletion
			if tt.chat {
				decode = DecodeChat
			}
			// Decoded, then held to the job's own rules, as the api does.
			var job genq.Job
			_, err := decode([]byte(tt.body), 8, &job)
			if err == nil {
				job.ID, job.Variant = "j", genq.VariantB
				err = job.Validate()
			}
			if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
				t.Errorf("got %v, want %q", err, tt.msg)
			}
		})
	}
}

func TestDecodeFillsTheJob(t *testing.T) {
	for _, tt := range []struct {
		name  string
		body  string
		chat  bool
		check func(genq.Job, Params) bool
	}{
		{"chat", `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"logprobs":true,"top_logprobs":2}`, true,
			func(j genq.Job, p Params) bool {
				return p.Model == "m" && len(j.Messages) == 1 && j.Messages[0].Role == genq.RoleSystem && j.Messages[0].Content == "a\nb" &&
					j.Logprobs && j.TopLogprobs == 2
			}},
		{"token ids", `{"prompt":[[1,2,3]],"logprobs":0,"max_tokens":4,"n":2}`, false,
			func(j genq.Job, p Params) bool {
				return len(j.PromptTokenIDs) == 3 && j.Logprobs && j.TopLogprobs == 0 && j.MaxTokens == 4 && p.Choices() == 2
			}},
		{"stream with usage", `{"prompt":"x","stream":true,"stream_options":{"include_usage":true}}`, false,
			func(j genq.Job, p Params) bool { return j.Prompt == "x" && j.Stream && p.IncludeUsage() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			decode := DecodeCompletion
			if tt.chat {
				decode = DecodeChat
			}
			var job genq.Job
			p, err := decode([]byte(tt.body), 64, &job)
			if err != nil || !tt.check(job, p) {
				t.Errorf("got %+v, %+v, %v", job, p, err)
			}
		})
	}
}

func TestDecodeCompletions(t *testing.T) {
	for _, tt := range []struct {
		name    string
		body    string
		prompts []string // each job's prompt, as text or as ids
		msg     string   // "" when accepted
	}{
		{"one string", `{"prompt":"a"}`, []string{"a"}, ""},
		{"strings", `{"prompt":["a","b","c"]}`, []string{"a", "b", "c"}, ""},
		{"token ids", `{"prompt":[1,2]}`, []string{"[1 2]"}, ""},
		{"lists of token ids", `{"prompt":[[1],[2,3]]}`, []string{"[1]", "[2 3]"}, ""},
		{"scoring batch", `{"prompt":["a","b"],"echo":true,"logprobs":1,"max_tokens":0,"temperature":0}`, []string{"a", "b"}, ""},
		{"the most answers", `{"prompt":["a","a","a","a","a","a","a","a"],"n":8}`, []string{"a", "a", "a", "a", "a", "a", "a", "a"}, ""},
		{"too many answers", `{"prompt":["a","a","a","a","a","a","a","a","a"],"n":8}`, nil,
			"prompt holds 9 prompts and n is 8: 72 answers, and this server gives at most 64 per request (prompts × n); split the batch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, jobs, err := DecodeCompletions([]byte(tt.body), 64, genq.Job{Envelope: genq.Envelope{ID: "tmpl"}})
			if tt.msg != "" {
				if genq.ErrorCode(err) != genq.Invalid || genq.ErrorMessage(err) != tt.msg {
					t.Fatalf("got %v, want %q", err, tt.msg)
				}
				return
			}
			if err != nil || len(jobs) != len(tt.prompts) {
				t.Fatalf("got %d jobs, %v; want %d", len(jobs), err, len(tt.prompts))
			}
			for i, j := range jobs {
				got := j.Prompt
				if j.Prompt == "" {
					got = fmt.Sprint(j.PromptTokenIDs)
				}
				if got != tt.prompts[i] || j.ID != "tmpl" || j.Temperature != p.Temperature {
					t.Errorf("job %d: %+v", i, j)
				}
				if strings.Contains(tt.body, `"max_tokens":0`) && (!j.PromptOnly || !j.Echo || !j.Logprobs || j.TopLogprobs != 1) {
					t.Errorf("job %d of a scoring batch: %+v", i, j)
				}
			}
		})
	}
}

func TestChoiceJobs(t *testing.T) {
	seed := int64(10)
	ids := []string{"b", "c"}
	next := func() string { id := ids[0]; ids = ids[1:]; return id }
	jobs := ChoiceJobs(genq.Job{Envelope: genq.Envelope{ID: "a"}, TextRequest: genq.TextRequest{Seed: &seed}}, 3, next)
	for i, want := range []struct {
		id   string
		seed int64
	}{{"a", 10}, {"b", 11}, {"c", 12}} {
		if jobs[i].ID != want.id || *jobs[i].Seed != want.seed {
			t.Errorf("job %d: id %s seed %d, want %s %d", i, jobs[i].ID, *jobs[i].Seed, want.id, want.seed)
		}
	}
}

func TestImageJobs(t *testing.T) {
	prompt, steps, n2, seed := "a cat", 200, 2, int64(5)
	tmpl := genq.Job{Envelope: genq.Envelope{ID: "first", Variant: genq.VariantC, Deadline: time.Now().Add(time.Minute)}}
	for _, tt := range []struct {
		name string
		req  ImageRequest
		msg  string // "" when accepted
	}{
		{"no prompt", ImageRequest{}, "prompt is required"},
		{"url", ImageRequest{Prompt: &prompt, ResponseFormat: "url"},
			"response_format url is not supported: this server returns images inline; send response_format: b64_json"},
		{"size", ImageRequest{Prompt: &prompt, Size: "big"}, `size must be WIDTHxHEIGHT (for example 1024x1024) or auto, not "big"`},
		{"steps", ImageRequest{Prompt: &prompt, Steps: &steps}, "num_inference_steps must be between 1 and 100, not 200"},
		{"two", ImageRequest{Prompt: &prompt, N: &n2, Seed: &seed, Size: "64x64"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := ImageJobs(tt.req, ImageLimits{}, 100, tmpl, func() string { return "next" })
			if tt.msg != "" {
				if genq.ErrorMessage(err) != tt.msg {
					t.Errorf("got %v, want %q", err, tt.msg)
				}
				return
			}
			if err != nil || len(jobs) != 2 || jobs[0].ID != "first" || jobs[1].ID != "next" || *jobs[1].Seed != 6 ||
				jobs[0].Width != 64 || jobs[1].Text != prompt {
				t.Errorf("got %+v, %v", jobs, err)
			}
		})
	}
}

func TestDecodeJobSubmit(t *testing.T) {
	for _, tt := range []struct {
		name    string
		variant genq.Variant
		body    string
		msg     string // "" when accepted
	}{
		{"chat", genq.VariantB, `{"type":"chat.completion","request":{"model":"m","messages":[{"role":"user","content":"hi"}]}}`, ""},
		{"image", genq.VariantC, `{"type":"image","request":{"prompt":"a cat"}}`, ""},
		{"no request", genq.VariantB, `{"type":"completion"}`, "request is required: the body of the synchronous route"},
		{"wrong kind", genq.VariantC, `{"type":"completion","request":{"prompt":"x"}}`,
			"variant C makes images: type completion needs a text variant (A or B)"},
		{"n", genq.VariantB, `{"type":"completion","request":{"prompt":"x","n":2}}`,
			"n must be 1 for an asynchronous job: submit one job per choice"},
		{"stream", genq.VariantB, `{"type":"completion","request":{"prompt":"x","stream":true}}`,
			"stream is for the synchronous routes: an asynchronous job's result is read whole"},
		{"type", genq.VariantB, `{"type":"audio","request":{}}`, `type must be chat.completion, completion, image or embedding, not "audio"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := genq.Job{Envelope: genq.Envelope{ID: "id", Variant: tt.variant, Deadline: time.Now().Add(time.Minute)}}
			_, _, err := DecodeJobSubmit([]byte(tt.body), Limits{MaxPromptBytes: 64}, &job)
			if genq.ErrorMessage(err) != tt.msg || (tt.msg == "" && job.ID != "id") {
				t.Errorf("got %v (job %s), want %q", err, job.ID, tt.msg)
			}
		})
	}
}

func TestCompletionLogprobsOf(t *testing.T) {
	entry := func(tok string, offset int, lp float64) genq.TokenLogprob {
		return genq.TokenLogprob{Logprob: genq.Logprob{Token: tok, Logprob: lp}, Offset: offset,
			Top: []genq.Logprob{{Token: "x", Logprob: -3}}}
	}
	for _, tt := range []struct {
		name             string
		text, promptText string
		prompt, entries  []genq.TokenLogprob
		want             string
	}{
		{"none asked", "ab", "", nil, nil, "null"},
		{"empty", "", "", nil, []genq.TokenLogprob{}, `{"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]}`},
		{"characters, not bytes", "éb", "", nil, []genq.TokenLogprob{entry("é", 0, -1), entry("b", 2, -2)},
			`{"tokens":["é","b"],"token_logprobs":[-1,-2],"top_logprobs":[{"x":-3,"é":-1},{"b":-2,"x":-3}],"text_offset":[0,1]}`},
		{"part of a character", "é", "", nil, []genq.TokenLogprob{
			{Logprob: genq.Logprob{Token: "\ufffd", Bytes: []int{0xc3}, Logprob: -1}, Top: []genq.Logprob{{Token: "\ufffd", Bytes: []int{0xc4}, Logprob: -3}}},
			{Logprob: genq.Logprob{Token: "\ufffd", Bytes: []int{0xa9}, Logprob: -2}, Offset: 0}},
			`{"tokens":["bytes:\\xc3","bytes:\\xa9"],"token_logprobs":[-1,-2],"top_logprobs":[{"bytes:\\xc3":-1,"bytes:\\xc4":-3},{"bytes:\\xa9":-2}],"text_offset":[0,0]}`},
		{"echo", "Qa", "Q", []genq.TokenLogprob{entry("Q", 0, 0)}, []genq.TokenLogprob{entry("a", 0, -1)},
			`{"tokens":["Q","a"],"token_logprobs":[null,-1],"top_logprobs":[null,{"a":-1,"x":-3}],"text_offset":[0,1]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := json.Marshal(completionLogprobsOf(tt.text, tt.prompt, tt.entries, tt.promptText))
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	result := func(text string, completion int) TextResult {
		return TextResult{TextResult: genq.TextResult{GeneratedText: text, FinishReason: genq.FinishStop, PromptText: "P",
			Usage: &genq.Usage{PromptTokens: 3, CompletionTokens: completion}}, JobID: "j", Created: 7, Model: "m"}
	}
	echoed := result("b", 1)
	echoed.EchoAsked = true
	second := result("bc", 2)
	second.Choice = 1
	otherPrompt := result("d", 1)
	otherPrompt.TextResult.Usage.PromptTokens = 5
	scored := result("", 0)
	scored.EchoAsked, scored.FinishReason = true, genq.FinishLength
	called := result(`{"name": "w", "parameters": {"city": "Oslo"}}`, 9)
	called.FinishReason = genq.FinishToolCalls
	called.ToolCalls = []genq.ToolCall{{ID: "call_1", Type: "function", Function: genq.ToolCallFunction{Name: "w", Arguments: `{"city": "Oslo"}`}}}
	for _, tt := range []struct {
		name string
		got  any
		want string
	}{
		{"chat, two choices", RenderChat(result("a", 1), second),
			`{"id":"chatcmpl-j","object":"chat.completion","created":7,"model":"m","choices":[` +
				`{"index":0,"message":{"role":"assistant","content":"a","refusal":null},"logprobs":null,"finish_reason":"stop"},` +
				`{"index":1,"message":{"role":"assistant","content":"bc","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`},
		{"chat that called a tool: content null", RenderChat(called),
			`{"id":"chatcmpl-j","object":"chat.completion","created":7,"model":"m","choices":[` +
				`{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"w","arguments":"{\"city\": \"Oslo\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],` +
				`"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}`},
		{"completion with echo", RenderCompletion(echoed),
			`{"id":"cmpl-j","object":"text_completion","created":7,"model":"m","choices":[` +
				`{"text":"Pb","index":0,"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`},
		{"two prompts, two choices each: each prompt counts once", RenderCompletion(result("a", 1), second, otherPrompt, second),
			`{"id":"cmpl-j","object":"text_completion","created":7,"model":"m","choices":[` +
				`{"text":"a","index":0,"logprobs":null,"finish_reason":"stop"},{"text":"bc","index":1,"logprobs":null,"finish_reason":"stop"},` +
				`{"text":"d","index":2,"logprobs":null,"finish_reason":"stop"},{"text":"bc","index":3,"logprobs":null,"finish_reason":"stop"}],` +
				`"usage":{"prompt_tokens":8,"completion_tokens":6,"total_tokens":14}}`},
		{"a prompt scored, nothing generated", RenderCompletion(scored),
			`{"id":"cmpl-j","object":"text_completion","created":7,"model":"m","choices":[` +
				`{"text":"P","index":0,"logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := json.Marshal(tt.got); string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestChunks(t *testing.T) {
	s := Stream{JobID: "j", Created: 7, Model: "m", Logprobs: true}
	piece := genq.TextPiece{Text: "hi"}
	chat := func() *ChatChunks {
		return NewChatChunks(s, []genq.Job{{Envelope: genq.Envelope{ID: "j"}}, {Envelope: genq.Envelope{ID: "k"}}})
	}
	for _, tt := range []struct {
		name string
		got  any
		want string
	}{
		{"chat piece, first", chat().Piece(0, "", piece, true),
			`{"id":"chatcmpl-j","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"logprobs":{"content":[],"refusal":null},"finish_reason":null}]}`},
		{"chat finish", chat().Finish(1, "stop", false),
			`{"id":"chatcmpl-j","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":1,"delta":{},"logprobs":null,"finish_reason":"stop"}]}`},
		{"chat usage", chat().Usage(Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}),
			`{"id":"chatcmpl-j","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`},
		{"completion piece", CompletionChunks{s}.Piece(0, "ab", piece, true),
			`{"id":"cmpl-j","object":"text_completion","created":7,"model":"m","choices":[{"text":"hi","index":0,"logprobs":{"tokens":[],"token_logprobs":[],"top_logprobs":[],"text_offset":[]},"finish_reason":null}]}`},
		{"completion finish", CompletionChunks{s}.Finish(0, "length", false),
			`{"id":"cmpl-j","object":"text_completion","created":7,"model":"m","choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := json.Marshal(tt.got); string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestErrorOf(t *testing.T) {
	for code, typ := range map[genq.Code]string{
		genq.Invalid: "invalid_request_error", genq.TooLarge: "invalid_request_error", genq.Unauthorized: "authentication_error",
		genq.NotFound: "not_found_error", genq.Overloaded: "rate_limit_error", genq.Timeout: "service_unavailable_error",
		genq.Internal: "server_error",
	} {
		got, _ := json.Marshal(ErrorOf(genq.Errorf(code, "why")))
		if want := `{"message":"why","type":"` + typ + `","param":null,"code":"` + string(code) + `"}`; string(got) != want {
			t.Errorf("%s: got %s, want %s", code, got, want)
		}
	}
}

// A streamed chat whose job offers tools sends its calls as
// delta.tool_calls: the id and name first, then the arguments in pieces,
// held back while the call's head is incomplete.
func TestToolCallChunks(t *testing.T) {
	s := Stream{JobID: "j", Created: 7, Model: "m"}
	tools := []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "w"}}}
	chunks := NewChatChunks(s, []genq.Job{{Envelope: genq.Envelope{ID: "a-b"}, TextRequest: genq.TextRequest{Tools: tools, ToolChoice: &genq.ToolChoice{Mode: "required"}}}})
	var got []string
	for _, text := range []string{`{"name": "`, `w", "param`, `eters": {"city`, `": "Oslo"}`, `}`} {
		if c := chunks.Piece(0, "", genq.TextPiece{Text: text}, len(got) == 0); c != nil {
			b, _ := json.Marshal(c)
			got = append(got, string(b))
		}
	}
	b, _ := json.Marshal(chunks.Finish(0, "tool_calls", false))
	got = append(got, string(b))
	const head = `{"id":"chatcmpl-j","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":`
	want := []string{
		head + `{"role":"assistant","tool_calls":[{"index":0,"id":"call_ab_0","type":"function","function":{"name":"w","arguments":"{\"city"}}]},"logprobs":null,"finish_reason":null}]}`,
		head + `{"tool_calls":[{"index":0,"function":{"arguments":"\": \"Oslo\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		head + `{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A chat's tools genq cannot run (custom tools of free text, hosted web
// search) are left out of the job and named; a choice that must call a
// tool, when none is left, is refused.
func TestChatToolsLeftOut(t *testing.T) {
	const fn = `{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`
	for _, tt := range []struct {
		name, body       string
		functions, names string
		msg              string
	}{
		{"a custom tool beside a function", `"tools":[{"type":"custom","custom":{"name":"grep"}},` + fn + `],"tool_choice":"auto"`, "f", "custom", ""},
		{"web_search_options", `"web_search_options":{},"tools":[` + fn + `]`, "f", "web_search", ""},
		{"a custom tool alone, auto", `"tools":[{"type":"custom","custom":{"name":"grep"}}],"tool_choice":"auto","parallel_tool_calls":false`, "", "custom", ""},
		{"a custom tool alone, required", `"tools":[{"type":"custom","custom":{"name":"grep"}}],"tool_choice":"required"`, "", "",
			`tool_choice "required" forces a tool, and this server can run none of these (custom): only function tools are served`},
		{"an untyped tool, refused as before", `"tools":[{"function":{"name":"f"}}]`, "f", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var job genq.Job
			_, err := DecodeChat([]byte(`{"messages":[{"role":"user","content":"hi"}],`+tt.body+`}`), 1<<10, &job)
			if tt.msg != "" {
				if genq.ErrorMessage(err) != tt.msg {
					t.Fatalf("got %v, want %q", err, tt.msg)
				}
				return
			}
			var names []string
			for _, f := range job.Tools {
				names = append(names, f.Function.Name)
			}
			if err != nil || strings.Join(names, ",") != tt.functions || strings.Join(job.IgnoredTools, ",") != tt.names {
				t.Fatalf("functions %v, ignored %v, %v", names, job.IgnoredTools, err)
			}
		})
	}
}
