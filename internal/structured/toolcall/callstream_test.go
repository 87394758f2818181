package toolcall

import (
	"math/rand/v2"
	"testing"
)

func TestCallStream(t *testing.T) {
	twoCalls := FormatToolCall("get_weather", `{"city": "Oslo \"}\" {", "days": [1, {"a": []}]}`) + "; " + FormatToolCall("ping", `{}`)
	for _, tc := range []struct {
		name    string
		text    string
		lazy    bool
		content string // "" when the text is calls
	}{
		{"calls", twoCalls, false, ""},
		{"calls, lazy", twoCalls, true, ""},
		{"calls after whitespace, lazy", "\n " + twoCalls, true, ""},
		{"prose, lazy", "It is sunny {really}.", true, "It is sunny {really}."},
		{"prose after whitespace, lazy", "  sunny", true, "  sunny"},
		{"a brace that is not a call, lazy", `{"weather": 1}`, true, `{"weather": 1}`},
	} {
		for _, split := range []string{"whole", "bytes", "random"} {
			t.Run(tc.name+", "+split, func(t *testing.T) {
				s := NewCallStream(tc.lazy)
				events := feed(s, tc.text, split, rand.New(rand.NewPCG(1, 2)))
				content, calls := Join(events)
				if tc.content != "" {
					if content != tc.content || len(calls) > 0 || s.Calls() {
						t.Fatalf("content %q, calls %v; want content %q", content, calls, tc.content)
					}
					return
				}
				want, ok := ParseToolCalls(tc.text)
				if !ok || content != "" || len(calls) != len(want) {
					t.Fatalf("content %q, calls %+v; want %+v", content, calls, want)
				}
				for i := range want {
					if calls[i] != want[i] {
						t.Errorf("call %d = %+v, want %+v", i, calls[i], want[i])
					}
				}
			})
		}
	}
}

// A call cut by the token limit keeps the arguments written so far.
func TestCallStreamCut(t *testing.T) {
	s := NewCallStream(false)
	events := append(s.Write(`{"name": "f", "parameters": {"a": [1, 2`), s.Close()...)
	_, calls := Join(events)
	if len(calls) != 1 || calls[0].Name != "f" || calls[0].Arguments != `{"a": [1, 2` {
		t.Fatalf("calls = %+v", calls)
	}
}

// feed writes text to s in pieces, whole, a byte at a time or of random
// lengths as split says, then closes s, and returns every event.
func feed(s *CallStream, text, split string, rng *rand.Rand) []CallEvent {
	var events []CallEvent
	for rest := text; rest != ""; {
		n := len(rest)
		switch split {
		case "bytes":
			n = 1
		case "random":
			n = min(len(rest), 1+rng.IntN(6))
		}
		events = append(events, s.Write(rest[:n])...)
		rest = rest[n:]
	}
	return append(events, s.Close()...)
}
