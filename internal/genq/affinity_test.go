package genq_test

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

// TestAffinityKey: every turn of one conversation has the key of its first
// turn; another conversation, or another kind of prompt, has another.
func TestAffinityKey(t *testing.T) {
	sys := genq.Message{Role: genq.RoleSystem, Content: "You answer briefly."}
	q1 := genq.Message{Role: genq.RoleUser, Content: "What is a queue?"}
	a1 := genq.Message{Role: genq.RoleAssistant, Content: "A line of jobs."}
	q2 := genq.Message{Role: genq.RoleUser, Content: "And a stream?"}
	long := strings.Repeat("a document about queues. ", 10)
	turn1 := genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{sys, q1}}}
	cases := []struct {
		name string
		a, b genq.Job
		same bool
	}{
		{"chat's next turn", turn1, genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{sys, q1, a1, q2}}}, true},
		{"chat without a system prompt", genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{q1}}}, genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{q1, a1, q2}}}, true},
		{"another opening question", turn1, genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{sys, q2}}}, false},
		{"another system prompt", turn1, genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: genq.RoleSystem, Content: "Be verbose."}, q1}}}, false},
		{"prompt's continuation", genq.Job{TextRequest: genq.TextRequest{Prompt: long}}, genq.Job{TextRequest: genq.TextRequest{Prompt: long + " More."}}, true},
		{"text's continuation", genq.Job{Envelope: genq.Envelope{Text: long}}, genq.Job{Envelope: genq.Envelope{Text: long + " More."}}, true},
		{"prompt and chat", genq.Job{TextRequest: genq.TextRequest{Prompt: q1.Content}}, genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{q1}}}, false},
		{"token ids' continuation", genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 2, 3}}}, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 2, 3}}}, true},
		{"other token ids", genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 2, 3}}}, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{1, 2, 4}}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ka, kb := c.a.AffinityKey(), c.b.AffinityKey()
			if ka == "" || kb == "" {
				t.Fatalf("empty key: %q, %q", ka, kb)
			}
			if (ka == kb) != c.same {
				t.Fatalf("keys %s and %s: same = %v, want %v", ka, kb, ka == kb, c.same)
			}
		})
	}
	if k := (genq.Job{}).AffinityKey(); k != "" {
		t.Fatalf("a job with no prompt has key %q", k)
	}
}
