package toolcall

import (
	"slices"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestHarmonyParse: a harmony call is read with its header in either order
// the format allows, with or without <|constrain|>, and a harmony message
// that is no call (another channel, no recipient, arguments not an
// object) is not one.
func TestHarmonyParse(t *testing.T) {
	weather := genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo"}`}
	for _, tc := range []struct {
		text string
		want []genq.ToolCallFunction
	}{
		{`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}`, []genq.ToolCallFunction{weather}},
		{`<|channel|>commentary to=functions.get_weather json<|message|>{"city": "Oslo"}`, []genq.ToolCallFunction{weather}},
		{`<|channel|>commentary to=functions.get_weather<|message|> {"city": "Oslo"} `, []genq.ToolCallFunction{weather}},
		{`<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}`, []genq.ToolCallFunction{weather}},
		{` to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Oslo"}`, []genq.ToolCallFunction{weather}},
		{`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|><|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json<|message|>{}`,
			[]genq.ToolCallFunction{weather, {Name: "ping", Arguments: "{}"}}},
		{`<|channel|>final<|message|>It is sunny.`, nil},
		{`<|channel|>commentary<|message|>Let me look.`, nil},
		{`<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}`, nil},
		{`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"Oslo"`, nil},
		{`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"} and more`, nil},
		{`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": `, nil},
	} {
		got, ok := Dialect{Format: Harmony}.Parse(tc.text)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.text, got, ok, tc.want)
		}
	}
}
