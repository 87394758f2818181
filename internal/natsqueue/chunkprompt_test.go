package natsqueue

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// A run's first chunk names the prompt's token counts, and the follower
// hands them on with its piece; the chunks after it name none.
func TestChunkNamesThePromptsCounts(t *testing.T) {
	m := chunkMsg(1, 1, "He")
	m.Header.Set(HeaderPromptTokens, "120 64")
	var f follower
	piece, err := f.chunk(m)
	if err != nil || piece.Text != "He" || piece.PromptTokens != 120 || piece.CachedTokens != 64 {
		t.Fatalf("%+v, %v", piece, err)
	}
	if piece, err = f.chunk(chunkMsg(1, 2, "llo")); err != nil || piece.PromptTokens != 0 {
		t.Fatalf("%+v, %v", piece, err)
	}

	// What a worker writes is what the follower reads.
	sent := &nats.Msg{Header: nats.Header{}}
	writePromptTokens(sent, genq.TextPiece{Text: "x", PromptTokens: 7, CachedTokens: 0})
	if got := sent.Header.Get(HeaderPromptTokens); got != "7 0" {
		t.Fatalf("header %q", got)
	}
}
