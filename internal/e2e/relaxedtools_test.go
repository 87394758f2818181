package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/genq/genq/internal/httpapi"
)

// claudeCodeTools are two tools in the shapes of Claude Code's that genq
// cannot enforce exactly: Workflow's script, a string of at most 524,288
// characters (beyond genq's 1,024), and SendMessage's to, an allOf of two
// patterns, the second (second) with a word boundary, which genq's
// automata do not follow.
func claudeCodeTools(second string) string {
	return `[{"name":"Workflow","description":"Runs a workflow script","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"script":{"type":"string","maxLength":4194304,"description":"The script"}},"required":["script"],"additionalProperties":false}},
	{"name":"SendMessage","description":"Sends a message to a teammate","input_schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"to":{"type":"string","allOf":[{"pattern":"^[a-z]{1,4}$"},{"pattern":"` + second + `"}]}},"required":["to"],"additionalProperties":false}}]`
}

// openAITools rewrites Anthropic's tools as OpenAI's functions.
func openAITools(anthropicTools string) string {
	var tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	if err := json.Unmarshal([]byte(anthropicTools), &tools); err != nil {
		panic(err)
	}
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	out := make([]map[string]any, len(tools))
	for i, t := range tools {
		out[i] = map[string]any{"type": "function", "function": function{t.Name, t.Description, t.InputSchema}}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

// TestRelaxedToolSchemas: a request that carries tools genq cannot enforce
// exactly is served: the forced call is held to the part of the schema
// genq enforces (the first pattern), parses as a tool_use block, and the
// answer says in Genq-Tool-Arguments-Unchecked whether its arguments fail
// the whole schema. A response format of such a schema, where the caller
// asked for a guarantee, is still refused.
func TestRelaxedToolSchemas(t *testing.T) {
	s := newStack(t, stackOptions{})
	s.tinyTextWorker(256)
	first := regexp.MustCompile(`^[a-z]{1,4}$`)
	for _, tc := range []struct {
		name, second string
		guaranteed   bool
	}{
		// Every string of the first pattern is one of the second: the
		// arguments always pass the whole schema.
		{"the patterns agree", `^[a-z]+\\b`, true},
		// No string is of both: the arguments never pass.
		{"the patterns disagree", `^[0-9]+\\b`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.postKey("/v1/messages", "", `{"model":"m","max_tokens":256,"temperature":1,"tools":`+claudeCodeTools(tc.second)+`,
				"tool_choice":{"type":"tool","name":"SendMessage"},"messages":[{"role":"user","content":"Tell bob the build is green."}]}`)
			m := decodeAs[anthropicMessage](t, r)
			if r.status != http.StatusOK || m.StopReason != "tool_use" || len(m.Content) != 1 || m.Content[0].Type != "tool_use" || m.Content[0].Name != "SendMessage" {
				t.Fatalf("%d %s", r.status, r.body)
			}
			var args struct {
				To string `json:"to"`
			}
			if err := json.Unmarshal(m.Content[0].Input, &args); err != nil || !first.MatchString(args.To) {
				t.Fatalf("the call's input %s does not hold to the pattern genq enforces (%v)", m.Content[0].Input, err)
			}
			want := map[bool]string{true: "", false: "SendMessage"}[tc.guaranteed]
			if got := r.header.Get(httpapi.HeaderToolArgumentsUnchecked); got != want {
				t.Fatalf("%s: %q, want %q", httpapi.HeaderToolArgumentsUnchecked, got, want)
			}

			// Streamed, the headers go before the call is known: the
			// same names come as a trailer, on both APIs.
			for _, streamed := range []struct{ path, body string }{
				{"/v1/messages", `{"model":"m","max_tokens":256,"temperature":1,"stream":true,"tools":` + claudeCodeTools(tc.second) + `,
					"tool_choice":{"type":"tool","name":"SendMessage"},"messages":[{"role":"user","content":"Tell bob the build is green."}]}`},
				{"/v1/chat/completions", `{"model":"m","max_tokens":256,"temperature":1,"stream":true,"tools":` + openAITools(claudeCodeTools(tc.second)) + `,
					"tool_choice":{"type":"function","function":{"name":"SendMessage"}},"messages":[{"role":"user","content":"Tell bob the build is green."}]}`},
			} {
				r := s.postKey(streamed.path, "", streamed.body)
				if r.status != http.StatusOK || !strings.Contains(string(r.body), "SendMessage") {
					t.Fatalf("%s streamed: %d %s", streamed.path, r.status, r.body)
				}
				if got := r.header.Get(httpapi.HeaderToolArgumentsUnchecked); got != "" {
					t.Fatalf("%s streamed: a header %q before the call was known", streamed.path, got)
				}
				if got := r.trailer.Get(httpapi.HeaderToolArgumentsUnchecked); got != want {
					t.Fatalf("%s streamed: trailer %s: %q, want %q", streamed.path, httpapi.HeaderToolArgumentsUnchecked, got, want)
				}
			}
		})
	}

	// tool_choice auto offers both: the request is served all the same.
	r := s.postKey("/v1/messages", "", `{"model":"m","max_tokens":8,"tools":`+claudeCodeTools(`^[0-9]+\\b`)+`,"messages":[{"role":"user","content":"hi"}]}`)
	if r.status != http.StatusOK {
		t.Fatalf("tool_choice auto: %d %s", r.status, r.body)
	}

	workflow := `{"type":"object","properties":{"script":{"type":"string","maxLength":4194304}},"required":["script"]}`
	for _, tc := range []struct{ name, path, body, want string }{
		{"output_config.format", "/v1/messages", `{"model":"m","max_tokens":8,"output_config":{"format":{"type":"json_schema","schema":` + workflow + `}},"messages":[{"role":"user","content":"hi"}]}`,
			"output_config.format"},
		{"response_format", "/v1/chat/completions", `{"model":"m","max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":` + workflow + `}},"messages":[{"role":"user","content":"hi"}]}`,
			"response_format.json_schema.schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.postKey(tc.path, "", tc.body)
			if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), tc.want) || !strings.Contains(string(r.body), "maxLength is 4194304") {
				t.Fatalf("%d %s; want 400 naming %s", r.status, r.body, tc.want)
			}
		})
	}
}
