package textgen

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestJobPromptRendersOfferedTools: a job's prompt holds the tools its
// answer may call: all of them, or the one tool_choice names; with
// tool_choice "none", all of them still, as vLLM renders them.
func TestJobPromptRendersOfferedTools(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, ContextSize: 2048})
	tests := []struct {
		name       string
		choice     *genq.ToolChoice
		want, lose []string
	}{
		{"auto", nil, []string{"Given the following functions", `"name": "get_weather"`, `"name": "now"`}, nil},
		{"named", &genq.ToolChoice{Function: "now"}, []string{"Given the following functions", `"name": "now"`}, []string{`"name": "get_weather"`}},
		{"none", &genq.ToolChoice{Mode: genq.ToolChoiceNone}, []string{"Given the following functions", `"name": "get_weather"`, `"name": "now"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := chatJob("p", 1)
			job.Tools, job.ToolChoice = []genq.Tool{weatherTool, timeTool}, tt.choice
			ids, err := b.jobPrompt(job)
			if err != nil {
				t.Fatal(err)
			}
			text, err := b.testDecode(ids)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.want {
				if !strings.Contains(text, s) {
					t.Errorf("the prompt lacks %q:\n%s", s, text)
				}
			}
			for _, s := range tt.lose {
				if strings.Contains(text, s) {
					t.Errorf("the prompt holds %q:\n%s", s, text)
				}
			}
		})
	}
}
