package toolcall

import (
	"encoding/json"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// OpenAI's harmony format, which gpt-oss speaks: an answer is messages,
// each <|start|>assistant, a header naming its channel (and, for a call,
// its recipient), <|message|>, the body, and its end:
//
//	<|channel|>analysis<|message|>…reasoning…<|end|>
//	<|start|>assistant<|channel|>final<|message|>…answer…<|return|>
//	<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
//
// The generation prompt ends with <|start|>assistant. The worker runs the
// analysis channel as the answer's reasoning (textgen's reasoner); the
// Harmony tool format is the commentary call.

// The harmony format's special tokens.
const (
	HarmonyStart     = "<|start|>"
	HarmonyChannel   = "<|channel|>"
	HarmonyMessage   = "<|message|>"
	HarmonyConstrain = "<|constrain|>"
	HarmonyEnd       = "<|end|>"
	HarmonyCall      = "<|call|>"
	HarmonyReturn    = "<|return|>"
)

// The headers of the harmony messages genq reads: the analysis channel's
// (reasoning), the final channel's (the answer), and what every
// assistant message after the first opens with.
const (
	HarmonyAnalysis  = HarmonyChannel + "analysis" + HarmonyMessage
	HarmonyFinal     = HarmonyChannel + "final" + HarmonyMessage
	HarmonyAssistant = HarmonyStart + "assistant"
)

// A harmony call's fixed texts: the header up to the function's name, and
// from it to the arguments. The opener, on which a lazy grammar binds, is
// as much of the commentary channel's header (where the calls go) as
// tells it from the other channels' (analysis, final): structured.Opening holds
// no more than 16 bytes of one.
const (
	harmonyCallOpener = HarmonyChannel + "c"
	harmonyCallHead   = HarmonyChannel + "commentary to=functions."
	harmonyCallArgs   = " " + HarmonyConstrain + "json" + HarmonyMessage
	// harmonyCallSep is between a conversation's calls, each its own
	// message; an answer's grammar allows one (<|call|> ends it).
	harmonyCallSep = HarmonyCall + HarmonyAssistant
)

// HarmonyTokens are the special tokens whose text a harmony answer keeps:
// its headers', so that the worker and the grammar see the channels.
func HarmonyTokens() []string {
	return []string{HarmonyStart, HarmonyChannel, HarmonyMessage, HarmonyConstrain, HarmonyEnd}
}

// parseHarmonyCall reads one harmony call at the start of text, in either
// order the format allows its header: the channel first (as genq's
// grammar writes it) or the recipient first
// (<|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>),
// with or without <|constrain|>. The arguments must be a JSON object.
func parseHarmonyCall(text string) (genq.ToolCallFunction, string, bool) {
	rest := strings.TrimPrefix(trimLeftWS(text), HarmonyAssistant)
	head, body, ok := strings.Cut(rest, HarmonyMessage)
	if !ok {
		return genq.ToolCallFunction{}, "", false
	}
	name, ok := harmonyRecipient(head)
	if !ok {
		return genq.ToolCallFunction{}, "", false
	}
	body = trimLeftWS(body)
	dec := json.NewDecoder(strings.NewReader(body))
	var args json.RawMessage
	if err := dec.Decode(&args); err != nil || len(args) == 0 || args[0] != '{' {
		return genq.ToolCallFunction{}, "", false
	}
	return genq.ToolCallFunction{Name: name, Arguments: string(args)}, body[dec.InputOffset():], true
}

// harmonyRecipient reads a call's header: the commentary channel, a
// recipient functions.NAME, and nothing else but the content type
// ("json", "<|constrain|>json"). It returns the function's name.
func harmonyRecipient(head string) (string, bool) {
	channel := false
	name := ""
	for _, field := range strings.Fields(strings.ReplaceAll(head, HarmonyChannel, " "+HarmonyChannel)) {
		switch {
		case field == HarmonyChannel+"commentary":
			channel = true
		case strings.HasPrefix(field, "to=functions."):
			name = strings.TrimPrefix(field, "to=functions.")
		case field == "json" || field == HarmonyConstrain+"json":
		default:
			return "", false
		}
	}
	return name, channel && name != ""
}
