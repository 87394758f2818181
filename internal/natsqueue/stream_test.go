package natsqueue

import (
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
				text, err := f.chunk(chunkMsg(ch.attempt, ch.seq, string(rune('a'+ch.seq-1))))
				if err != nil {
					broken = genq.ErrorCode(err) == genq.Unavailable
					break
				}
				got.WriteString(text)
			}
			if !broken {
				a := &genq.Answer{Attempt: tt.final, Body: io.NopCloser(strings.NewReader(`{"generated_text":"abc"}`))}
				rest, err := f.final(a)
				if err != nil {
					broken = genq.ErrorCode(err) == genq.Unavailable
				} else {
					got.WriteString("|" + rest)
				}
			}
			if got.String() != tt.want || broken != tt.wantBroken {
				t.Fatalf("forwarded %q, broken %v; want %q, %v", got.String(), broken, tt.want, tt.wantBroken)
			}
		})
	}
}
