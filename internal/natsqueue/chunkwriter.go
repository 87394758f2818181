package natsqueue

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// ChunkWriter publishes a streaming job's text. Sends are core NATS
// publishes, buffered by the client and never blocking the backend; one
// that fails leaves a gap in the sequence, which the producer sees.
type ChunkWriter struct {
	conn    *Conn
	subject string
	jobID   string
	attempt string

	mu     sync.Mutex
	seq    int
	closed bool
}

// Send publishes the next piece of text, with its tokens' log-probabilities
// when there are any. After Close it does nothing: the backend may still
// call it while it notices that its run ended.
func (w *ChunkWriter) Send(piece genq.TextPiece) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if piece.Reasoning != "" {
		// A chunk of its own, before the piece's text.
		w.publish(&nats.Msg{Subject: ChunkSubject(w.subject), Header: nats.Header{HeaderPart: {PartReasoning}}, Data: []byte(piece.Reasoning)}, piece)
		piece.PromptTokens = 0
	}
	if piece.Text == "" && len(piece.Logprobs) == 0 {
		return
	}
	m := &nats.Msg{Subject: ChunkSubject(w.subject), Header: nats.Header{}, Data: []byte(piece.Text)}
	if len(piece.Logprobs) > 0 {
		entries, _ := json.Marshal(piece.Logprobs) // one line: JSON escapes control characters
		m.Header.Set(HeaderLogprobs, string(entries))
	}
	w.publish(m, piece)
}

// publish sends m as the run's next chunk; w.mu is held.
func (w *ChunkWriter) publish(m *nats.Msg, piece genq.TextPiece) {
	w.seq++
	writePromptTokens(m, piece)
	m.Header.Set(HeaderKind, KindChunk)
	m.Header.Set(HeaderJobID, w.jobID)
	m.Header.Set(HeaderAttempt, w.attempt)
	m.Header.Set(HeaderChunkSeq, strconv.Itoa(w.seq))
	if err := w.conn.nc.PublishMsg(m); err != nil {
		w.conn.log.Debug("chunk lost", "job_id", w.jobID, "seq", w.seq, "err", err)
	}
}

// writePromptTokens names the prompt's counts on the chunk of a piece
// that carries them, a run's first.
func writePromptTokens(m *nats.Msg, piece genq.TextPiece) {
	if piece.PromptTokens > 0 {
		m.Header.Set(HeaderPromptTokens, strconv.Itoa(piece.PromptTokens)+" "+strconv.Itoa(piece.CachedTokens))
	}
}

// SendImage publishes a preview of the job's image: its bytes, with their
// content type and the preview's index. A preview too big for one message
// is dropped (the producer sees a gap in the indexes).
func (w *ChunkWriter) SendImage(piece genq.ImagePiece) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.seq++
	m := &nats.Msg{Subject: ChunkSubject(w.subject), Header: nats.Header{}, Data: piece.Data}
	m.Header.Set(HeaderKind, KindChunk)
	m.Header.Set(HeaderJobID, w.jobID)
	m.Header.Set(HeaderAttempt, w.attempt)
	m.Header.Set(HeaderChunkSeq, strconv.Itoa(w.seq))
	m.Header.Set(HeaderPartial, strconv.Itoa(piece.Index))
	m.Header.Set(HeaderContentType, piece.ContentType)
	if err := w.conn.nc.PublishMsg(m); err != nil {
		w.conn.log.Warn("preview lost", "job_id", w.jobID, "index", piece.Index, "bytes", len(piece.Data), "err", err)
	}
}

// Close ends the writer: no chunk is sent after it.
func (w *ChunkWriter) Close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}
