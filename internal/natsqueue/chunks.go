package natsqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// Streaming (docs/protocol.md, "Streaming"): a worker running a job with
// stream set publishes its text as chunks, core NATS messages to the job's
// reply subject, before the usual reply. Each chunk names its delivery
// attempt and its place in that attempt's run, so a producer can tell a
// lost chunk or a second run from the text that belongs to the answer.
const (
	HeaderChunkSeq = "Genq-Chunk-Seq" // a chunk's place in its run, from 1
	HeaderLogprobs = "Genq-Logprobs"  // a chunk's tokens' log-probabilities, JSON, when the job asked for them
	HeaderPartial  = "Genq-Partial"   // an image chunk's place among the job's previews, from 0
	KindChunk      = "chunk"          // Genq-Kind of a chunk
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
	if w.closed || piece.Text == "" && len(piece.Logprobs) == 0 {
		return
	}
	w.seq++
	m := &nats.Msg{Subject: ChunkSubject(w.subject), Header: nats.Header{}, Data: []byte(piece.Text)}
	if len(piece.Logprobs) > 0 {
		entries, _ := json.Marshal(piece.Logprobs) // one line: JSON escapes control characters
		m.Header.Set(HeaderLogprobs, string(entries))
	}
	m.Header.Set(HeaderKind, KindChunk)
	m.Header.Set(HeaderJobID, w.jobID)
	m.Header.Set(HeaderAttempt, w.attempt)
	m.Header.Set(HeaderChunkSeq, strconv.Itoa(w.seq))
	if err := w.conn.nc.PublishMsg(m); err != nil {
		w.conn.log.Debug("chunk lost", "job_id", w.jobID, "seq", w.seq, "err", err)
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

// errStreamBroken is what a producer reports when the chunks it forwarded
// cannot be continued consistently.
func errStreamBroken(format string, args ...any) error {
	return genq.Errorf(genq.Unavailable, "the answer's stream broke off: %s; retry", fmt.Sprintf(format, args...))
}

// follower checks a stream's chunks and passes on only text that belongs
// to one consistent answer. It follows the run of the highest attempt
// while nothing is forwarded; once text is forwarded, another run, or a
// chunk out of sequence, breaks the stream.
type follower struct {
	attempt int
	next    int
	sent    strings.Builder
	entries int // log-probability entries forwarded
}

// chunk returns the piece of m to forward (empty for none), or an error
// that ends the stream.
func (f *follower) chunk(m *nats.Msg) (genq.TextPiece, error) {
	attempt := atoiOr0(m.Header.Get(HeaderAttempt))
	seq := atoiOr0(m.Header.Get(HeaderChunkSeq))
	switch {
	case attempt < f.attempt:
		return genq.TextPiece{}, nil // a run already superseded, still going
	case attempt > f.attempt && f.sent.Len() > 0:
		return genq.TextPiece{}, errStreamBroken("the worker stopped after %d bytes and attempt %d started over", f.sent.Len(), attempt)
	case attempt > f.attempt:
		f.attempt, f.next = attempt, 1
	}
	if seq != f.next {
		return genq.TextPiece{}, errStreamBroken("chunk %d of attempt %d came where chunk %d was due", seq, attempt, f.next)
	}
	piece := genq.TextPiece{Text: string(m.Data)}
	if raw := m.Header.Get(HeaderLogprobs); raw != "" {
		if err := json.Unmarshal([]byte(raw), &piece.Logprobs); err != nil {
			return genq.TextPiece{}, errStreamBroken("chunk %d of attempt %d has log-probabilities genq could not read", seq, attempt)
		}
	}
	f.next++
	f.sent.Write(m.Data)
	f.entries += len(piece.Logprobs)
	return piece, nil
}

// final checks the answer against the text forwarded, and returns what of
// it is still to forward: chunks lost at the end of a run are made up from
// the answer, which holds the whole text and every log-probability. The
// answer's body is replaced by the bytes read.
func (f *follower) final(a *genq.ReceivedResult) (genq.TextPiece, error) {
	data, err := io.ReadAll(io.LimitReader(a.Body, genq.MaxTextResultBytes))
	a.Body.Close()
	if err != nil {
		return genq.TextPiece{}, genq.WrapError(genq.Unavailable, err, "the result could not be read")
	}
	a.Body = io.NopCloser(bytes.NewReader(data))
	var out genq.TextResult
	if err := json.Unmarshal(data, &out); err != nil {
		return genq.TextPiece{}, genq.WrapError(genq.Internal, err, "the worker sent a text result genq could not read")
	}
	sent := f.sent.String()
	switch {
	case sent != "" && a.Attempt != f.attempt:
		return genq.TextPiece{}, errStreamBroken("the answer came from attempt %d, the text streamed from attempt %d", a.Attempt, f.attempt)
	case !strings.HasPrefix(out.GeneratedText, sent):
		return genq.TextPiece{}, errStreamBroken("the answer does not continue the text streamed")
	case f.entries > len(out.Logprobs):
		return genq.TextPiece{}, errStreamBroken("%d log-probabilities streamed, the answer has %d", f.entries, len(out.Logprobs))
	}
	return genq.TextPiece{Text: out.GeneratedText[len(sent):], Logprobs: out.Logprobs[f.entries:]}, nil
}

// ChunkSubject is where the chunks of a streaming job whose reply goes to
// replyTo are published: a subject of their own, so that a producer's
// reply handler never mistakes a chunk for the reply.
func ChunkSubject(replyTo string) string { return replyTo + ".chunks" }
