package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestRenderCachedTokens: the prompt tokens a worker reused come back as
// OpenAI reports them, counted once per prompt however many choices; none
// reused leaves the details out of the chat and completion usage.
func TestRenderCachedTokens(t *testing.T) {
	result := func(prompt, cached, choice int) TextResult {
		return TextResult{TextResult: genq.TextResult{GeneratedText: "a", FinishReason: genq.FinishStop,
			Usage: &genq.Usage{PromptTokens: prompt, CompletionTokens: 1, CachedTokens: cached}}, JobID: "j", Created: 7, Model: "m", Choice: choice}
	}
	for _, tt := range []struct {
		name string
		got  any
		want string
	}{
		{"chat", RenderChat(result(40, 35, 0)),
			`"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,"prompt_tokens_details":{"cached_tokens":35}}`},
		{"completions, two prompts of two choices", RenderCompletion(result(40, 35, 0), result(40, 35, 1), result(10, 4, 0), result(10, 4, 1)),
			`"usage":{"prompt_tokens":50,"completion_tokens":4,"total_tokens":54,"prompt_tokens_details":{"cached_tokens":39}}`},
		{"nothing reused", RenderChat(result(40, 0, 0)),
			`"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41}}`},
		{"streamed usage", NewChatChunks(Stream{JobID: "j", Created: 7, Model: "m"}, nil).Usage(ChoicesUsage([]TextResult{result(40, 35, 0)})),
			`"usage":{"prompt_tokens":40,"completion_tokens":1,"total_tokens":41,"prompt_tokens_details":{"cached_tokens":35}}`},
		{"responses", ResponseStream{JobID: "j", Created: 7, Model: "m"}.Done(result(40, 35, 0).TextResult),
			`"usage":{"input_tokens":40,"input_tokens_details":{"cached_tokens":35},"output_tokens":1,`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := json.Marshal(tt.got)
			if !strings.Contains(string(got), tt.want) {
				t.Errorf("got  %s\nwant it to hold %s", got, tt.want)
			}
		})
	}
}
