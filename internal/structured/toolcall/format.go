// Package toolcall knows how model families write tool calls as text: each
// format's fixed text around a call (Layout), writing a conversation's
// calls (Write), reading them back from an answer (Parse) or from a stream
// as it comes (CallStream), and gpt-oss's harmony messages. It knows no
// grammar: the structured package compiles a tool set's calls from a
// format's Layout (structured.CompileTools).
package toolcall

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// ToolFormat is how a model family writes its tool calls. Each format lays
// its calls out in fixed text (Layout, from which structured.CompileTools
// compiles their grammar), reads them back from an answer (Parse), writes a
// conversation's earlier calls the way the model writes them (Write), and
// names the text that opens a call (Opener), on which a lazy grammar binds.
// The zero value is Llama3JSON, the format genq knew first and falls back
// to.
type ToolFormat uint8

const (
	// Llama3JSON is Llama 3.1's JSON call, several joined by "; " (as
	// vLLM's Llama 3 JSON parser reads them):
	//	{"name": "get_weather", "parameters": {"city": "Oslo"}}
	Llama3JSON ToolFormat = iota
	// Hermes is the <tool_call> block of Hermes 2 Pro and 3, Qwen2.5,
	// QwQ and Qwen3, several one after another, a newline between:
	//	<tool_call>
	//	{"name": "get_weather", "arguments": {"city": "Oslo"}}
	//	</tool_call>
	Hermes
	// Mistral is the [TOOL_CALLS] list of Mistral's v3 (tekken) models,
	// Mistral Nemo among them; each call may carry the id of nine letters
	// and digits that Mistral's templates require of a conversation's
	// calls:
	//	[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "a1B2c3D4e"}]
	// [TOOL_CALLS] is a control token of Mistral's vocabularies: the
	// worker must give it its text (PreservedTokens).
	Mistral
	// Harmony is gpt-oss's call: a message on the commentary channel to
	// functions.NAME, its arguments JSON, ended by <|call|> (an
	// end-of-generation token, so one call per answer; harmony.go):
	//	<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}
	Harmony
)

// ToolFormats are the formats genq knows, in the order CallStream tries
// their openers.
func ToolFormats() []ToolFormat { return []ToolFormat{Llama3JSON, Hermes, Mistral, Harmony} }

// Layout is a format's fixed text around its calls: a call is Head, the
// function's name, Args, the arguments' JSON object, an optional id (Mistral)
// and Tail; calls are joined by Sep, after Open and before Close. The
// calls begin with Opener.
type Layout struct {
	Open, Head, Args, Tail, Sep, Close string
	Opener                             string
	ID                                 bool
}

var layouts = [...]Layout{
	Llama3JSON: {Head: `{"name": "`, Args: `", "parameters": `, Tail: `}`, Sep: "; ", Opener: "{"},
	Hermes:     {Head: "<tool_call>\n{\"name\": \"", Args: `", "arguments": `, Tail: "}\n</tool_call>", Sep: "\n", Opener: "<tool_call>"},
	Mistral: {Open: "[TOOL_CALLS][", Head: `{"name": "`, Args: `", "arguments": `, Tail: `}`, Sep: ", ", Close: "]", ID: true,
		Opener: "[TOOL_CALLS]"},
	Harmony: {Head: harmonyCallHead, Args: harmonyCallArgs, Sep: harmonyCallSep, Opener: harmonyCallOpener},
}

// MistralIDHead is the id field of a Mistral call, before its nine characters
// and closing quote.
const MistralIDHead = `, "id": "`

// MistralIDLen is the length of the call ids Mistral's templates require.
const MistralIDLen = 9

// Layout is f's fixed text; an unknown format has Llama3JSON's.
func (f ToolFormat) Layout() Layout {
	if int(f) < len(layouts) {
		return layouts[f]
	}
	return layouts[Llama3JSON]
}

// String names the format.
func (f ToolFormat) String() string {
	switch f {
	case Llama3JSON:
		return "llama3-json"
	case Hermes:
		return "hermes"
	case Mistral:
		return "mistral"
	case Harmony:
		return "harmony"
	}
	return "ToolFormat(" + strconv.Itoa(int(f)) + ")"
}

// Opener is the text an answer's calls begin with: the bytes on which a lazy
// grammar binds, and by which CallStream tells the format.
func (f ToolFormat) Opener() string { return f.Layout().Opener }

// PreservedTokens are the special tokens of the format whose text the
// answer must keep, as llama.cpp's preserved_tokens: a vocabulary that has
// them as control tokens would otherwise drop them from the text, and the
// grammar could neither allow nor see them.
func (f ToolFormat) PreservedTokens() []string {
	switch f {
	case Hermes:
		return []string{"<tool_call>", "</tool_call>"}
	case Mistral:
		return []string{"[TOOL_CALLS]"}
	case Harmony:
		return []string{HarmonyChannel, HarmonyConstrain, HarmonyMessage}
	}
	return nil
}

// Write writes a conversation's earlier calls as the model writes them, for
// a template that does not render calls itself. Arguments keep the client's
// text; empty ones are {}.
func (f ToolFormat) Write(calls []genq.ToolCall) string {
	l := f.Layout()
	var b strings.Builder
	b.WriteString(l.Open)
	for i, c := range calls {
		if i > 0 {
			b.WriteString(l.Sep)
		}
		args := strings.TrimSpace(c.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		b.WriteString(l.Head + c.Function.Name + l.Args + args)
		if l.ID {
			b.WriteString(MistralIDHead + f.CallID(c.ID) + `"`)
		}
		b.WriteString(l.Tail)
	}
	b.WriteString(l.Close)
	return b.String()
}

// CallID is the id a call of this format carries in a conversation: the
// client's, except that Mistral's templates refuse any id but nine letters
// and digits, so another is derived from it (the same for a call and for
// the tool result that answers it). genq's own ids (genq.ToolCallID) are
// longer.
func (f ToolFormat) CallID(id string) string {
	if f != Mistral || isMistralID(id) {
		return id
	}
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(id))
	out := make([]byte, MistralIDLen)
	for i := range out {
		out[i] = digits[int(sum[i])%len(digits)]
	}
	return string(out)
}

func isMistralID(id string) bool {
	if len(id) != MistralIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z') {
			return false
		}
	}
	return true
}

// Parse reads the calls an answer made in this format, as the grammar of
// structured.CompileTools has them, with whitespace around and between the
// fixed texts allowed. It reports false when the text is not calls (prose,
// when the model was free to answer so); the arguments keep the model's
// own text. A Mistral call's own id is not returned: genq names calls
// itself (genq.ToolCallID), so that a stream can name a call before its id
// is written.
func (f ToolFormat) Parse(text string) ([]genq.ToolCallFunction, bool) {
	l := f.Layout()
	rest := trimLeftWS(text)
	var ok bool
	if l.Open != "" {
		if rest, ok = cutLoose(rest, l.Open); !ok {
			return nil, false
		}
	}
	// Between calls, the separator's text without its whitespace: ";" and
	// "," (Hermes' newline is whitespace alone).
	sep := strings.TrimSpace(l.Sep)
	var calls []genq.ToolCallFunction
	for {
		var call genq.ToolCallFunction
		if call, rest, ok = f.parseCall(rest); !ok {
			return nil, false
		}
		calls = append(calls, call)
		rest = trimLeftWS(rest)
		if l.Close != "" {
			if after, ok := cutLoose(rest, l.Close); ok {
				rest = after
				break
			}
		} else if rest == "" {
			break
		}
		if sep != "" {
			if rest, ok = cutLoose(rest, sep); !ok {
				return nil, false
			}
		}
	}
	return calls, trimLeftWS(rest) == ""
}

// parseCall reads one call at the start of text: its fixed texts, and its
// JSON object read as JSON (name, arguments, and Mistral's id).
func (f ToolFormat) parseCall(text string) (genq.ToolCallFunction, string, bool) {
	if f == Harmony {
		return parseHarmonyCall(text)
	}
	rest := text
	if f == Hermes {
		var ok bool
		if rest, ok = cutLoose(rest, "<tool_call>"); !ok {
			return genq.ToolCallFunction{}, "", false
		}
	}
	rest = trimLeftWS(rest)
	dec := json.NewDecoder(strings.NewReader(rest))
	var call struct {
		Name       *string         `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
		Arguments  json.RawMessage `json:"arguments"`
	}
	if err := dec.Decode(&call); err != nil || call.Name == nil {
		return genq.ToolCallFunction{}, "", false
	}
	args := call.Arguments
	if f == Llama3JSON {
		args = call.Parameters
	}
	if len(args) == 0 || args[0] != '{' {
		return genq.ToolCallFunction{}, "", false
	}
	rest = rest[dec.InputOffset():]
	if f == Hermes {
		var ok bool
		if rest, ok = cutLoose(trimLeftWS(rest), "</tool_call>"); !ok {
			return genq.ToolCallFunction{}, "", false
		}
	}
	return genq.ToolCallFunction{Name: *call.Name, Arguments: string(args)}, rest, true
}

// cutLoose cuts lit from the start of text, a run of whitespace in text
// matching each whitespace byte of lit (none included).
func cutLoose(text, lit string) (string, bool) {
	for i := 0; i < len(lit); i++ {
		if IsSpace(lit[i]) {
			text = trimLeftWS(text)
			continue
		}
		if text == "" || text[0] != lit[i] {
			return text, false
		}
		text = text[1:]
	}
	return text, true
}

// IsSpace tells JSON's whitespace, which the formats allow around their
// fixed texts.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimLeftWS(s string) string { return strings.TrimLeft(s, " \t\r\n") }

// Dialect is how a model answers with tool calls: the format of its calls,
// and whether its answer may open with a reasoning block
// (<think>…</think>, Qwen3's and QwQ's), before the calls or the prose.
// A dialect of Harmony calls reasons on harmony's channels instead
// (Channels).
type Dialect struct {
	Format    ToolFormat
	Reasoning bool
}

// Channels reports whether the model speaks harmony (harmony.go): its
// answer is messages on channels, its reasoning on the analysis one, which
// the worker runs apart; what Parse reads is the message after it.
func (d Dialect) Channels() bool { return d.Format == Harmony }

// The tags of a reasoning block.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// PreservedTokens are the special tokens whose text the answer keeps: the
// format's, and the reasoning block's tags.
func (d Dialect) PreservedTokens() []string {
	out := d.Format.PreservedTokens()
	if d.Reasoning {
		out = append(out, ThinkOpen, ThinkClose)
	}
	if d.Channels() {
		for _, t := range HarmonyTokens() {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// Parse reads the calls an answer made: a leading reasoning block, when the
// dialect has one, is skipped, and the rest must be calls.
func (d Dialect) Parse(text string) ([]genq.ToolCallFunction, bool) {
	if d.Reasoning {
		text = skipReasoning(text)
	}
	return d.Format.Parse(text)
}

// skipReasoning drops a leading <think>…</think> block and the whitespace
// around it.
func skipReasoning(text string) string {
	t := trimLeftWS(text)
	if !strings.HasPrefix(t, ThinkOpen) {
		return text
	}
	_, after, ok := strings.Cut(t[len(ThinkOpen):], ThinkClose)
	if !ok {
		return text
	}
	return after
}

func (d Dialect) String() string {
	if d.Channels() {
		return fmt.Sprintf("%s on harmony channels", d.Format)
	}
	if d.Reasoning {
		return fmt.Sprintf("%s after <think>", d.Format)
	}
	return d.Format.String()
}

// FormatToolCall writes a call in Llama 3.1's JSON format (Llama3JSON),
// the way the model writes it, for rendering an assistant's earlier calls
// into the prompt.
func FormatToolCall(name, arguments string) string {
	return Llama3JSON.Write([]genq.ToolCall{{Function: genq.ToolCallFunction{Name: name, Arguments: arguments}}})
}

// FormatToolCalls writes an assistant's calls in Llama3JSON, joined as the
// model joins them.
func FormatToolCalls(calls []genq.ToolCall) string { return Llama3JSON.Write(calls) }

// ParseToolCalls reads the calls an answer made in Llama3JSON
// (ToolFormat.Parse).
func ParseToolCalls(text string) ([]genq.ToolCallFunction, bool) { return Llama3JSON.Parse(text) }
