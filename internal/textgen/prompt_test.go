package textgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

func TestRenderLlama3Conversation(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1})
	tests := []struct {
		name, system, user, want string
	}{
		{
			"seed conversation", DefaultSystemPrompt, "Hello!",
			"<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
		},
		{
			// Meta's template trims message content.
			"content is trimmed", DefaultSystemPrompt, "  spaced out \n",
			"<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nspaced out<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
		},
		{
			// Template syntax in user text is data, not template.
			"template syntax stays text", "sys", "{{ .System }} <b>",
			"<|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\n{{ .System }} <b><|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b.cfg.SystemPrompt = tt.system
			got, err := b.renderChat([]genq.Message{{Role: genq.RoleUser, Content: tt.user}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("rendered\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestPromptTokensStartWithBOSAndSharedPrefix(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, PrefixCache: "off"})
	v := b.vocab
	bos := v.Lookup("<|begin_of_text|>")
	ids, err := b.promptTokens("What is 2+2?")
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != bos {
		t.Fatalf("first token %d, want BOS %d", ids[0], bos)
	}
	if len(b.prefix) < 10 || !slices.Equal(ids[:len(b.prefix)], b.prefix) {
		t.Fatalf("prompt %v does not start with the shared prefix %v", ids, b.prefix)
	}
	// The special tokens of the template are single tokens, not their text.
	text, _ := b.testDecode(ids)
	if !strings.HasSuffix(text, "<|start_header_id|>assistant<|end_header_id|>\n\n") {
		t.Fatalf("prompt ends %q; want the generation prompt", text)
	}
	// Three headers (system, user, assistant), two ended turns.
	for s, want := range map[string]int{"<|start_header_id|>": 3, "<|end_header_id|>": 3, "<|eot_id|>": 2, "<|begin_of_text|>": 1} {
		if n := countToken(ids, v.Lookup(s)); n != want {
			t.Errorf("%s appears %d times as a token, want %d", s, n, want)
		}
	}
}

// TestNULsAreTokenizedAsTheirByte: a NUL (a tool's output of a binary
// file, a random model's answer sent back by an agent) becomes the byte's
// own token, the text on either side as it would be alone, and the whole
// decodes back to the text; a chat holding NULs is answered.
func TestNULsAreTokenizedAsTheirByte(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, MaxNewTokens: 4})
	v := b.vocab
	nul := v.Lookup("Ā") // byte-level BPE writes the byte 0 as U+0100
	bos := v.Lookup("<|begin_of_text|>")
	for _, text := range []string{"\x00", "a\x00b", "\x00\x00", "ls\x00", "<|eot_id|>\x00<|eot_id|>", "ELF\x02\x01\x00\x00 main"} {
		ids, err := b.testEncode(text, true)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if ids[0] != bos {
			t.Errorf("%q: first token %d, want BOS %d", text, ids[0], bos)
		}
		if n := countToken(ids, nul); n != strings.Count(text, "\x00") {
			t.Errorf("%q: %d NUL tokens (%d), want %d: %v", text, n, nul, strings.Count(text, "\x00"), ids)
		}
		if got, _ := b.testDecode(ids[1:]); got != text {
			t.Errorf("%q decodes to %q", text, got)
		}
		first, _ := b.testEncode(strings.Split(text, "\x00")[0], true)
		if !slices.Equal(ids[:len(first)], first) {
			t.Errorf("%q: starts %v, want the text before the NUL alone, %v", text, ids, first)
		}
	}
	job := genq.Job{Envelope: genq.Envelope{ID: "1", Variant: genq.VariantA}, TextRequest: genq.TextRequest{Messages: []genq.Message{
		{Role: genq.RoleUser, Content: "cat a.out"},
		{Role: genq.RoleAssistant, Content: "\x7fELF\x00\x00", ReasoningContent: "a\x00"},
		{Role: genq.RoleUser, Content: "and now?\x00"},
	}}}
	if err := job.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if _, err := b.generateJob(t.Context(), job); err != nil {
		t.Fatalf("a chat holding NULs: %v", err)
	}
}

func countToken(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// TestAccept checks how sampled tokens become the answer: stop tokens end
// it, special tokens are dropped, and the token limit ends it.
func TestAccept(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{Slots: 1, MaxNewTokens: 6})
	v := b.vocab
	tok := func(s string) int32 {
		id := v.Lookup(s)
		if id < 0 {
			t.Fatalf("no token %q", s)
		}
		return id
	}
	// "é" is two bytes, each its own byte-level token.
	eAcute := []int32{tok(tinygguf.ByteLevelAlphabet()[0xc3]), tok(tinygguf.ByteLevelAlphabet()[0xa9])}
	tests := []struct {
		name     string
		tokens   []int32
		wantText string
		wantDone int // index of the token that completes the answer, -1 for none
	}{
		{"eot stops", []int32{tok("h"), tok("i"), tok("<|eot_id|>"), tok("x")}, "hi", 2},
		{"end_of_text stops", []int32{tok("o"), tok("<|end_of_text|>")}, "o", 1},
		{"eom stops", []int32{tok("<|eom_id|>")}, "", 0},
		{"header tokens are not text", []int32{tok("a"), tok("<|start_header_id|>"), tok("b")}, "ab", -1},
		{"limit of 6 tokens stops", []int32{tok("a"), tok("b"), tok("c"), tok("d"), tok("e"), tok("f"), tok("g")}, "abcdef", 5},
		{"split character is held back, then completed", []int32{eAcute[0], eAcute[1], tok("<|eot_id|>")}, "é", 2},
		{"half a character at the stop becomes U+FFFD", []int32{tok("a"), eAcute[0], tok("<|eot_id|>")}, "a\uFFFD", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq := &sequence{req: newRequest(nil, nil)}
			// The request's limit, as newJobRequest sets it: the worker's
			// cap of 6 for a job that asks for none.
			limit, err := b.info.Limits.Answer(genq.Job{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			seq.req.maxTokens = limit
			doneAt := -1
			for i, id := range tt.tokens {
				done, err := seq.accept(b.textModel, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				if done {
					doneAt = i
					break
				}
			}
			if doneAt != tt.wantDone {
				t.Fatalf("done at token %d, want %d", doneAt, tt.wantDone)
			}
			text := seq.text.String() + seq.utf8.Flush()
			if text != tt.wantText {
				t.Fatalf("text %q, want %q", text, tt.wantText)
			}
		})
	}
}
