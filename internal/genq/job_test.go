package genq_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// Old job messages, of text alone, read as they always did; stop may be a
// string or a list; max_completion_tokens stands for max_tokens.
func TestJobJSON(t *testing.T) {
	tests := []struct {
		body string
		want genq.Job
	}{
		{`{"id":"a","variant":"B","text":"hi","deadline":"0001-01-01T00:00:00Z"}`, genq.Job{Envelope: genq.Envelope{ID: "a", Variant: "B", Text: "hi"}}},
		{`{"id":"a","variant":"B","prompt":"p","stop":"\n","max_completion_tokens":7}`,
			genq.Job{Envelope: genq.Envelope{ID: "a", Variant: "B"}, TextRequest: genq.TextRequest{Prompt: "p", Stop: genq.StopList{"\n"}, MaxCompletionTokens: 7}}},
		{`{"id":"a","variant":"B","messages":[{"role":"user","content":"x"}],"stop":["a","b"],"seed":3,"temperature":0}`,
			genq.Job{Envelope: genq.Envelope{ID: "a", Variant: "B"}, TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: "user", Content: "x"}}, Stop: genq.StopList{"a", "b"}, Seed: ptr(int64(3)), Temperature: ptr(0.0)}}},
	}
	for _, tt := range tests {
		var j genq.Job
		if err := json.Unmarshal([]byte(tt.body), &j); err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if !reflect.DeepEqual(j, tt.want) {
			t.Errorf("%s:\ngot  %+v\nwant %+v", tt.body, j, tt.want)
		}
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", tt.body, err)
		}
	}
	if got := (genq.Job{TextRequest: genq.TextRequest{MaxCompletionTokens: 7}}).MaxNewTokens(); got != 7 {
		t.Errorf("MaxNewTokens() = %d, want 7", got)
	}
	var j genq.Job
	if err := json.Unmarshal([]byte(`{"stop":3}`), &j); err == nil || !strings.Contains(err.Error(), "stop must be a string or a list") {
		t.Errorf("stop 3: %v", err)
	}
	// A job of text alone marshals as it did before these fields.
	b, _ := json.Marshal(genq.Job{Envelope: genq.Envelope{ID: "a", Variant: "B", Text: "hi"}})
	if want := `{"id":"a","variant":"B","text":"hi","deadline":"0001-01-01T00:00:00Z"}`; string(b) != want {
		t.Errorf("marshal: %s, want %s", b, want)
	}
}

func TestToolChoiceJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    genq.ToolChoice
		wantErr string
	}{
		{`"auto"`, genq.ToolChoice{Mode: "auto"}, ""},
		{`"none"`, genq.ToolChoice{Mode: "none"}, ""},
		{`"required"`, genq.ToolChoice{Mode: "required"}, ""},
		{`{"type":"function","function":{"name":"w"}}`, genq.ToolChoice{Function: "w"}, ""},
		{`"any"`, genq.ToolChoice{}, `"any" is not one of`},
		{`{"type":"function"}`, genq.ToolChoice{}, "tool_choice must be"},
		{`3`, genq.ToolChoice{}, "tool_choice must be"},
	} {
		var got genq.ToolChoice
		err := json.Unmarshal([]byte(tc.in), &got)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		back, err := json.Marshal(got)
		if err != nil || string(back) != tc.in {
			t.Errorf("%s: marshals back to %s, %v", tc.in, back, err)
		}
	}
}

func TestToolsOfferedAndShown(t *testing.T) {
	a := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "a"}}
	b := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "b"}}
	names := func(ts []genq.Tool) string {
		var s []string
		for _, t := range ts {
			s = append(s, t.Function.Name)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		name           string
		choice         *genq.ToolChoice
		mode           string
		offered, shown string
	}{
		{"auto by default", nil, "auto", "a,b", "a,b"},
		{"required", &genq.ToolChoice{Mode: "required"}, "required", "a,b", "a,b"},
		{"named", &genq.ToolChoice{Function: "b"}, "required", "b", "b"},
		{"none", &genq.ToolChoice{Mode: "none"}, "", "", "a,b"},
	} {
		j := genq.Job{TextRequest: genq.TextRequest{Tools: []genq.Tool{a, b}, ToolChoice: tc.choice}}
		if got := j.ToolMode(); got != tc.mode {
			t.Errorf("%s: mode %q, want %q", tc.name, got, tc.mode)
		}
		if got := names(j.OfferedTools()); got != tc.offered {
			t.Errorf("%s: offered %q, want %q", tc.name, got, tc.offered)
		}
		if got := names(j.PromptTools()); got != tc.shown {
			t.Errorf("%s: shown %q, want %q", tc.name, got, tc.shown)
		}
	}
}
