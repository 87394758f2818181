package natsqueue

import (
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

func chunkMsg(attempt, seq int, text string) *nats.Msg {
	m := &nats.Msg{Header: nats.Header{}, Data: []byte(text)}
	m.Header.Set(HeaderAttempt, strconv.Itoa(attempt))
	m.Header.Set(HeaderChunkSeq, strconv.Itoa(seq))
	return m
}

// The follower forwards one consistent answer, or breaks the stream.
func TestFollower(t *testing.T) {
	type c struct{ attempt, seq int }
	tests := []struct {
		name       string
		chunks     []c
		final      int    // the answer's attempt
		want       string // forwarded text, the final rest included
		wantBroken bool
	}{
		{"in order", []c{{1, 1}, {1, 2}}, 1, "ab|c", false},
		{"tail lost, made up", []c{{1, 1}}, 1, "a|bc", false},
		{"gap", []c{{1, 1}, {1, 3}}, 1, "a", true},
		{"new run before any text", []c{{2, 1}, {2, 2}}, 2, "ab|c", false},
		{"new run after text", []c{{1, 1}, {2, 1}}, 2, "a", true},
		{"answer of another run", []c{{1, 1}}, 2, "a", true},
		{"late chunk of an old run", []c{{2, 1}, {1, 2}, {2, 2}}, 2, "ab|c", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f follower
			var got strings.Builder
			broken := false
			for _, ch := range tt.chunks {
				piece, err := f.chunk(chunkMsg(ch.attempt, ch.seq, string(rune('a'+ch.seq-1))))
				if err != nil {
					broken = genq.ErrorCode(err) == genq.Unavailable
					break
				}
				got.WriteString(piece.Text)
			}
			if !broken {
				a := &genq.ReceivedResult{Attempt: tt.final, Body: io.NopCloser(strings.NewReader(`{"generated_text":"abc"}`))}
				rest, err := f.final(a)
				if err != nil {
					broken = genq.ErrorCode(err) == genq.Unavailable
				} else {
					got.WriteString("|" + rest.Text)
				}
			}
			if got.String() != tt.want || broken != tt.wantBroken {
				t.Fatalf("forwarded %q, broken %v; want %q, %v", got.String(), broken, tt.want, tt.wantBroken)
			}
		})
	}
}

// The follower forwards each chunk's log-probabilities, and makes up the
// ones of lost chunks from the answer.
func TestFollowerLogprobs(t *testing.T) {
	withEntries := func(seq int, text string, tokens ...string) *nats.Msg {
		m := chunkMsg(1, seq, text)
		var entries []genq.TokenLogprob
		for _, tok := range tokens {
			entries = append(entries, genq.TokenLogprob{Logprob: genq.Logprob{Token: tok, Logprob: -1}})
		}
		raw, _ := json.Marshal(entries)
		m.Header.Set(HeaderLogprobs, string(raw))
		return m
	}
	answer := `{"generated_text":"abc","logprobs":[{"token":"a"},{"token":"b"},{"token":"c"}]}`
	var f follower
	piece, err := f.chunk(withEntries(1, "ab", "a", "b"))
	if err != nil || piece.Text != "ab" || len(piece.Logprobs) != 2 || piece.Logprobs[1].Token != "b" {
		t.Fatalf("%+v, %v", piece, err)
	}
	rest, err := f.final(&genq.ReceivedResult{Attempt: 1, Body: io.NopCloser(strings.NewReader(answer))})
	if err != nil || rest.Text != "c" || len(rest.Logprobs) != 1 || rest.Logprobs[0].Token != "c" {
		t.Fatalf("rest %+v, %v", rest, err)
	}

	var g follower
	if _, err := g.chunk(withEntries(1, "abc", "a", "b", "c", "d")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.final(&genq.ReceivedResult{Attempt: 1, Body: io.NopCloser(strings.NewReader(answer))}); genq.ErrorCode(err) != genq.Unavailable {
		t.Fatalf("more entries streamed than the answer has: %v", err)
	}
	bad := chunkMsg(1, 1, "a")
	bad.Header.Set(HeaderLogprobs, "[{")
	var h follower
	if _, err := h.chunk(bad); genq.ErrorCode(err) != genq.Unavailable {
		t.Fatalf("unreadable entries: %v", err)
	}
}

// The follower forwards reasoning chunks (Genq-Part: reasoning) as
// reasoning, before the text, and makes up a lost tail of either from the
// answer; reasoning after text, or an answer whose reasoning does not
// continue what was forwarded, breaks the stream.
func TestFollowerReasoning(t *testing.T) {
	reasoning := func(seq int, text string) *nats.Msg {
		m := chunkMsg(1, seq, text)
		m.Header.Set(HeaderPart, PartReasoning)
		return m
	}
	answer := func() *genq.ReceivedResult {
		return &genq.ReceivedResult{Attempt: 1, Body: io.NopCloser(strings.NewReader(`{"generated_text":"abc","reasoning":"xyz"}`))}
	}
	for _, tt := range []struct {
		name   string
		chunks []*nats.Msg
		want   string // reasoning/text forwarded, then the rest made up
		broken bool
	}{
		{"whole", []*nats.Msg{reasoning(1, "xy"), reasoning(2, "z"), chunkMsg(1, 3, "ab")}, "xyz/ab|/c", false},
		{"reasoning's tail lost", []*nats.Msg{reasoning(1, "x")}, "x/|yz/abc", false},
		{"reasoning after text", []*nats.Msg{reasoning(1, "x"), chunkMsg(1, 2, "a"), reasoning(3, "y")}, "x/a", true},
		{"another reasoning", []*nats.Msg{reasoning(1, "w")}, "w/", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var f follower
			var r, x strings.Builder
			broken := false
			for _, m := range tt.chunks {
				piece, err := f.chunk(m)
				if err != nil {
					broken = true
					break
				}
				r.WriteString(piece.Reasoning)
				x.WriteString(piece.Text)
			}
			got := r.String() + "/" + x.String()
			if !broken {
				rest, err := f.final(answer())
				if err != nil {
					broken = true
				} else {
					got += "|" + rest.Reasoning + "/" + rest.Text
				}
			}
			if got != tt.want || broken != tt.broken {
				t.Fatalf("forwarded %q, broken %v; want %q, %v", got, broken, tt.want, tt.broken)
			}
		})
	}
}
