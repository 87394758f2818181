// Package batchrun runs the batches of OpenAI's Batch API. A batch's
// progress is kept in its record in JetStream (Store), not in an api's
// memory. Every api runs the batches whose record no other api holds
// (Runner.Run): it takes a lease in the record, renewed as it goes,
// queues the batch's requests a window at a time under ids made from the
// batch's (so a request queued twice is kept once, and one that has run
// is not run again), counts their outcomes in the results store, and at
// the end writes the output and error files and the final status. An api
// that stops leaves its lease to lapse, and another carries the batch on
// from its record.
package batchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/tracing/spans"
	"github.com/genq/genq/internal/webhook"
)

// Routes is what the batch runner needs of the routes a batch's
// requests stand for: it queues, reads and renders each request as its
// route would, and holds none of their rules itself.
type Routes interface {
	// LineJobs are the jobs of a batch's request at index i, one per
	// answer it asks for, checked as its route checks a request of the
	// tenant named (its key's models= list too).
	LineJobs(b openai.Batch, l openai.BatchLine, i int, tenant string) ([]genq.Job, error)
	// LineAnswers is how many jobs a batch's request was queued as; one
	// for a request that could not be read.
	LineAnswers(b openai.Batch, l openai.BatchLine) int
	// LineModel is the catalogue's name of the model a request names, ""
	// when the request does not read.
	LineModel(b openai.Batch, l openai.BatchLine) string
	// LineOutcome is a request's outcome as its route would answer, from
	// its jobs' (ids): body and status, its usage, and its error if it
	// failed; NotFound while it has none.
	// refused is the request's refusal when it was refused at its turn.
	LineOutcome(ctx context.Context, endpoint string, ids []string, refused error, model string,
		request json.RawMessage) (any, int, tenant.Usage, error)
	// ShareAs is the context a request is queued under for the tenant
	// named, its fair share of the workers.
	ShareAs(ctx context.Context, tenant string) context.Context
	// MeterLine counts an answered request's usage for the tenant named.
	MeterLine(ctx context.Context, tenant string, u tenant.Usage)
	// LineSpan starts the span a request is queued under.
	LineSpan(ctx context.Context, rec Record, i int) (context.Context, trace.Span)
}

// Queue is the part of the async queue the runner uses.
type Queue interface {
	Submit(ctx context.Context, job genq.Job) error
	CancelJob(id string)
	Running(ctx context.Context, id string) (bool, genq.Progress, error)
}

// Store keeps what the runner reads and writes: batch records, kept
// output lines, and the input and output files (natsqueue.BatchStore).
type Store interface {
	PutFile(ctx context.Context, f genq.StoredFile, data io.Reader) (genq.StoredFile, error)
	// FileData is NotFound for a file that is not there.
	FileData(ctx context.Context, id string) ([]byte, error)
	// PutBatch writes a batch's record over revision (0: a new one) and
	// returns the new revision, or genq.ErrChanged when another write
	// came first.
	PutBatch(ctx context.Context, id string, record []byte, revision uint64) (uint64, error)
	Batch(ctx context.Context, id string) ([]byte, uint64, error)
	BatchIDs(ctx context.Context) ([]string, error)
	// PutBatchLine keeps the output line of a batch's request i;
	// BatchLine reads it, NotFound while there is none.
	PutBatchLine(ctx context.Context, id string, i int, line []byte) error
	BatchLine(ctx context.Context, id string, i int) ([]byte, error)
}

// Config paces the runner (httpapi.BatchConfig), its defaults set.
type Config struct {
	Window         int
	LeaseFor       time.Duration
	ChecksPerRound int
	// PollEvery is how often a round runs when nothing wakes the runner.
	PollEvery time.Duration
}

// Runner carries on the batches whose record no other api holds.
type Runner struct {
	Routes   Routes
	Store    Store
	Queue    Queue
	Webhooks webhook.Sender
	Config   Config
	// Instance names this api in the batches it holds.
	Instance string
	Log      *slog.Logger
}

// Run carries on every batch this api can hold, round after
// round, until ctx ends; kick starts a round at once.
func (r *Runner) Run(ctx context.Context, kick <-chan struct{}) {
	cfg := r.Config
	tick := time.NewTicker(cfg.PollEvery)
	defer tick.Stop()
	// What this api knows, in memory, of the batches: each held batch's
	// lines and what is known of them, and the batches that ended (they
	// never change again, so they are not read each round).
	run := batchMemory{states: map[string]map[int]lineState{}, inputs: map[string]*batchInput{}, ended: map[string]bool{}}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
		ids, err := r.Store.BatchIDs(ctx)
		if err != nil {
			r.Log.Debug("batches unavailable; trying again", "err", err)
			continue
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return
			}
			if run.ended[id] {
				continue
			}
			if err := r.stepBatch(ctx, id, cfg, &run); err != nil && !errors.Is(err, genq.ErrChanged) {
				r.Log.Warn("batch step failed; trying again", "batch_id", id, "err", err)
			}
		}
	}
}

// batchMemory is what an api's batch runner keeps between rounds.
type batchMemory struct {
	states map[string]map[int]lineState
	inputs map[string]*batchInput
	ended  map[string]bool
}

// batchInput is a batch's requests, as read from its input file, and how
// many jobs each was queued as, worked out once per request (lineIDs).
type batchInput struct {
	lines   []openai.BatchLine
	answers []int  // 0: not worked out yet
	tenant  string // whose usage the answers are
}

// lineIDs are the job ids of request i of batch b.
func (r *Runner) lineIDs(b *openai.Batch, in *batchInput, i int) []string {
	if in.answers[i] == 0 {
		in.answers[i] = r.Routes.LineAnswers(*b, in.lines[i])
	}
	return LineJobIDs(b.ID, i, in.answers[i])
}

// forget drops what is kept of batch id.
func (m *batchMemory) forget(id string) {
	delete(m.states, id)
	delete(m.inputs, id)
}

// stepBatch moves batch id on by one round when this api holds it or can
// take it.
func (r *Runner) stepBatch(ctx context.Context, id string, cfg Config, run *batchMemory) error {
	rec, rev, err := Read(ctx, r.Store, id)
	if err == nil && rec.Batch.Ended() {
		run.ended[id] = true
	}
	if err != nil || rec.Batch.Ended() {
		run.forget(id)
		return err
	}
	nowMs := time.Now().UnixMilli()
	if rec.Run.Owner != r.Instance && rec.Run.Lease > nowMs {
		run.forget(id) // another api holds it
		return nil
	}
	// The lease, renewed by the round's own write of the record; a batch
	// taken over is claimed first, before any of its work.
	claim := rec.Run.Owner != r.Instance
	rec.Run.Owner, rec.Run.Lease = r.Instance, nowMs+cfg.LeaseFor.Milliseconds()
	if claim {
		run.forget(id) // what is done is read again
		if rev, err = Write(ctx, r.Store, rec, rev); err != nil {
			return err
		}
	}
	log := r.Log.With("batch_id", id)
	if rec.Batch.Status == openai.BatchValidating {
		return r.validateBatch(ctx, rec, rev, log)
	}
	in, ok := run.inputs[id]
	if !ok {
		lines, err := r.batchLines(ctx, rec.Batch)
		if err != nil {
			return err
		}
		in = &batchInput{lines: lines, answers: make([]int, len(lines)), tenant: rec.Run.Tenant}
		run.inputs[id] = in
	}
	if run.states[id] == nil {
		run.states[id] = map[int]lineState{}
	}
	return r.advanceBatch(ctx, rec, rev, in, run.states[id], cfg, log)
}

// batchLines reads a batch's requests from its input file.
func (r *Runner) batchLines(ctx context.Context, b openai.Batch) ([]openai.BatchLine, error) {
	data, err := r.Store.FileData(ctx, b.InputFileID)
	if err != nil {
		return nil, err
	}
	lines, errs := openai.ParseBatchInput(data, b.Endpoint, nil)
	if len(errs) > 0 {
		return nil, fmt.Errorf("the input file changed since it was checked: %s", errs[0].Message)
	}
	return lines, nil
}

// validateBatch checks every line of a batch's input as its route would,
// and fails the batch naming the bad lines, or starts it.
func (r *Runner) validateBatch(ctx context.Context, rec Record, rev uint64, log *slog.Logger) error {
	data, err := r.Store.FileData(ctx, rec.Batch.InputFileID)
	var lines []openai.BatchLine
	var errs []openai.BatchError
	switch {
	case genq.ErrorCode(err) == genq.NotFound:
		errs = []openai.BatchError{{Code: "missing_file", Message: "the input file " + rec.Batch.InputFileID + " is gone"}}
	case err != nil:
		return err
	default:
		lines, errs = openai.ParseBatchInput(data, rec.Batch.Endpoint, func(body []byte) error {
			_, err := r.Routes.LineJobs(rec.Batch, openai.BatchLine{Body: body}, 0, rec.Run.Tenant)
			if genq.IsModelNotFound(err) {
				// As its route would, the request alone fails with a
				// 404 in its output line; the others run.
				return nil
			}
			return err
		})
	}
	if len(errs) > 0 {
		rec.Batch.Status, rec.Batch.FailedAt = openai.BatchFailed, now()
		rec.Batch.Errors = &openai.BatchErrors{Object: "list", Data: errs}
		log.Info("batch failed its validation", "errors", len(errs), "first", errs[0].Message)
	} else {
		rec.Batch.Status, rec.Batch.InProgressAt = openai.BatchInProgress, now()
		rec.Batch.RequestCounts.Total = len(lines)
		rec.Run.Lines = len(lines)
		log.Info("batch in progress", "requests", len(lines))
	}
	_, err = Write(ctx, r.Store, rec, rev)
	if err == nil && rec.Batch.Ended() {
		r.batchEnded(rec, log)
	}
	return err
}

// lineState is what the runner knows of a queued request: nothing yet,
// or its outcome.
type lineState int8

const (
	lineUnknown lineState = iota // not looked at since this api took the batch
	linePending
	lineAnswered
	lineFailed
)

func finished(st lineState) bool { return st == lineAnswered || st == lineFailed }

// advanceBatch queues the next window of a running batch's requests,
// reads the outcomes of those queued, and, once every request has one (or
// the batch is cancelled or expired and none is still running), writes
// its files and ends it.
func (r *Runner) advanceBatch(ctx context.Context, rec Record, rev uint64, in *batchInput, state map[int]lineState,
	cfg Config, log *slog.Logger) error {
	b, lines := &rec.Batch, in.lines
	stopping := b.Status == openai.BatchCancelling
	if !stopping && b.Status == openai.BatchInProgress && b.ExpiresAt != nil && time.Now().Unix() >= *b.ExpiresAt {
		b.Status, stopping = openai.BatchExpired, true // the window closed: stop what is left
	}
	// The outcomes of the requests queued, the oldest unfinished first:
	// ChecksPerRound of them a round, and past that for as long as each
	// one read has finished. Requests finish about in the order they were
	// queued, so a round reads about what finished since the last and a
	// few more: a window of waiting requests does not cost the store a
	// read of each, each round, and a fast worker is not held to
	// ChecksPerRound answers a round.
	pending, checked, more := 0, 0, true
	for i := 0; i < rec.Run.Queued; i++ {
		if finished(state[i]) {
			continue
		}
		if checked < cfg.ChecksPerRound || more {
			checked++
			st, err := r.lineState(ctx, b, in, i, rec.Run.refusal(i), state[i] == lineUnknown)
			if err != nil {
				return err
			}
			state[i] = st
			more = finished(st)
		}
		if !finished(state[i]) {
			pending++
		}
	}
	if stopping && !rec.Run.CancelSent {
		for i := 0; i < rec.Run.Queued; i++ {
			if !finished(state[i]) {
				for _, id := range r.lineIDs(b, in, i) {
					r.Queue.CancelJob(id)
				}
			}
		}
		rec.Run.CancelSent = true
	}
	for !stopping && rec.Run.Queued < len(lines) && pending < cfg.Window {
		i := rec.Run.Queued
		jobs, err := r.Routes.LineJobs(*b, lines[i], i, in.tenant)
		in.answers[i] = len(jobs) // 0 when refused: worked out again, as 1
		lctx, span := r.Routes.LineSpan(ctx, rec, i)
		for _, job := range jobs {
			if err == nil {
				err = r.Queue.Submit(r.Routes.ShareAs(lctx, in.tenant), job) // one queued before is kept once
			}
		}
		spans.End(span, err) // failed when it was not queued
		if err != nil && !isLineRefusal(err) {
			break // the queue is full or away: the next round tries again
		}
		rec.Run.Queued++
		if err != nil { // refused now (the workers' limits changed, or its model is unknown): it fails alone
			rec.Run.refuse(i, err)
			if state[i], err = r.lineState(ctx, b, in, i, rec.Run.refusal(i), false); err != nil {
				return err
			}
			continue
		}
		pending++
	}
	ended := rec.Run.Queued == len(lines) && pending == 0
	if stopping {
		// Requests no worker has started are dropped by their cancel
		// mark; the batch ends once none is running.
		ended = true
		for i := 0; i < rec.Run.Queued && ended; i++ {
			if finished(state[i]) {
				continue
			}
			st, err := r.lineState(ctx, b, in, i, rec.Run.refusal(i), state[i] == lineUnknown)
			if err != nil {
				return err
			}
			if state[i] = st; finished(st) {
				continue
			}
			anyRunning := false
			for _, id := range r.lineIDs(b, in, i) {
				running, _, err := r.Queue.Running(ctx, id)
				if err != nil {
					return err
				}
				anyRunning = anyRunning || running
			}
			if !anyRunning { // it may have finished since it was read: its answer goes in the output
				if state[i], err = r.lineState(ctx, b, in, i, rec.Run.refusal(i), false); err != nil {
					return err
				}
			}
			ended = !anyRunning
		}
	}
	// Counted after the stopping batch's last look, which can find more
	// requests finished: the counts are those of the output files.
	b.RequestCounts.Completed, b.RequestCounts.Failed = 0, 0
	for _, st := range state {
		switch st {
		case lineAnswered:
			b.RequestCounts.Completed++
		case lineFailed:
			b.RequestCounts.Failed++
		}
	}
	var err error
	if !ended {
		_, err = Write(ctx, r.Store, rec, rev)
		return err
	}
	if b.Status == openai.BatchInProgress {
		b.Status, b.FinalizingAt = openai.BatchFinalizing, now()
		if rev, err = Write(ctx, r.Store, rec, rev); err != nil {
			return err
		}
	}
	if err := r.writeBatchFiles(ctx, &rec, lines, state); err != nil {
		return err
	}
	switch b.Status {
	case openai.BatchFinalizing:
		b.Status, b.CompletedAt = openai.BatchCompleted, now()
	case openai.BatchCancelling:
		b.Status, b.CancelledAt = openai.BatchCancelled, now()
	case openai.BatchExpired:
		b.ExpiredAt = now()
		// The requests never run are failed ones, in the error file.
		b.RequestCounts.Failed = b.RequestCounts.Total - b.RequestCounts.Completed
	}
	if _, err := Write(ctx, r.Store, rec, rev); err != nil {
		return err
	}
	log.Info("batch ended", "status", b.Status, "completed", b.RequestCounts.Completed, "failed", b.RequestCounts.Failed)
	r.batchEnded(rec, log)
	return nil
}

// keptLine is a finished request's output line as the batch keeps it.
type keptLine struct {
	Failed bool                   `json:"failed"`
	Line   openai.BatchOutputLine `json:"line"`
}

// lineState is what is known of a batch's request i: its kept output
// line, or its outcome, which is then rendered and kept at once (the
// results store keeps an outcome for RESULT_TTL only, and a batch can
// outlast it); pending while it has neither.
func (r *Runner) lineState(ctx context.Context, b *openai.Batch, in *batchInput, i int, refused error, kept bool) (lineState, error) {
	var raw []byte
	var err error = genq.Errorf(genq.NotFound, "not read")
	if kept { // only an api that took the batch over may find lines kept by another
		raw, err = r.Store.BatchLine(ctx, b.ID, i)
	}
	if err == nil {
		var k keptLine
		if err := json.Unmarshal(raw, &k); err != nil {
			return linePending, fmt.Errorf("batch %s line %d: %w", b.ID, i, err)
		}
		if k.Failed {
			return lineFailed, nil
		}
		return lineAnswered, nil
	}
	if genq.ErrorCode(err) != genq.NotFound {
		return linePending, err
	}
	ids := r.lineIDs(b, in, i)
	body, status, used, err := r.Routes.LineOutcome(ctx, b.Endpoint, ids, refused, r.Routes.LineModel(*b, in.lines[i]), in.lines[i].Body)
	switch {
	case IsStoreError(err):
		return linePending, err
	case refused == nil && genq.ErrorCode(err) == genq.NotFound:
		return linePending, nil
	case err != nil && len(ids) > 1:
		// One answer failed, so the request did: its others need not run.
		for _, id := range ids {
			r.Queue.CancelJob(id)
		}
	}
	k := keptLine{Failed: err != nil, Line: openai.BatchOutputLine{ID: "batch_req_" + ids[0], CustomID: in.lines[i].CustomID,
		Response: &openai.BatchOutputResponse{StatusCode: status, RequestID: ids[0], Body: body}}}
	raw, err = json.Marshal(k)
	if err == nil {
		err = r.Store.PutBatchLine(ctx, b.ID, i, raw)
	}
	if err != nil {
		return linePending, err
	}
	if k.Failed {
		return lineFailed, nil
	}
	r.Routes.MeterLine(ctx, in.tenant, used) // once: the line is kept, and read back from now on
	return lineAnswered, nil
}

// IsStoreError tells an error of the results store from a job's own.
func IsStoreError(err error) bool {
	var appErr *genq.Error
	return errors.As(err, &appErr) && appErr.Err != nil && genq.ErrorCode(err) == genq.Unavailable
}

// writeBatchFiles writes a batch's output file (a line per answered
// request) and error file (a line per failed one), under ids made from
// the batch's, so that two apis that both end it write the same files.
func (r *Runner) writeBatchFiles(ctx context.Context, rec *Record, lines []openai.BatchLine, state map[int]lineState) error {
	b := &rec.Batch
	var out, errs bytes.Buffer
	enc, errEnc := json.NewEncoder(&out), json.NewEncoder(&errs)
	for i := range lines {
		if i >= rec.Run.Queued || !finished(state[i]) {
			// Never run: cancelled, or expired before it was queued or
			// started. An expired batch lists these in its error file, as
			// OpenAI's does, so every custom_id is accounted for.
			if b.Status == openai.BatchExpired {
				if err := errEnc.Encode(expiredLine(b.ID, i, lines[i])); err != nil {
					return err
				}
			}
			continue
		}
		raw, err := r.Store.BatchLine(ctx, b.ID, i)
		if err != nil {
			return err
		}
		var k keptLine
		if err := json.Unmarshal(raw, &k); err != nil {
			return fmt.Errorf("batch %s line %d: %w", b.ID, i, err)
		}
		to := enc
		if k.Failed {
			to = errEnc
		}
		if err := to.Encode(k.Line); err != nil {
			return err
		}
	}
	put := func(suffix string, data []byte) (*string, error) {
		if len(data) == 0 {
			return nil, nil
		}
		f := genq.StoredFile{ID: "file-" + b.ID + "-" + suffix, Filename: b.ID + "_" + suffix + ".jsonl",
			Purpose: openai.PurposeBatchOutput, CreatedAt: time.Now().Unix()}
		if _, err := r.Store.PutFile(ctx, f, bytes.NewReader(data)); err != nil {
			return nil, err
		}
		return &f.ID, nil
	}
	var err error
	if b.OutputFileID, err = put("output", out.Bytes()); err != nil {
		return err
	}
	b.ErrorFileID, err = put("errors", errs.Bytes())
	return err
}

// expiredLine is the error file's line of request i of batch id, never
// run before the batch's completion window closed: OpenAI's words for it.
func expiredLine(id string, i int, l openai.BatchLine) openai.BatchOutputLine {
	return openai.BatchOutputLine{ID: "batch_req_" + LineJobID(id, i), CustomID: l.CustomID,
		Error: &openai.Error{Code: "batch_expired", Message: "This request could not be executed before the completion window expired."}}
}

// batchEnded sends the batch's webhook, when it has one, from the api
// that ended it.
func (r *Runner) batchEnded(rec Record, log *slog.Logger) {
	if rec.Run.Webhook == "" {
		return
	}
	body, err := json.Marshal(rec.Batch)
	if err != nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if err := r.Webhooks.Send(ctx, rec.Run.Webhook, rec.Batch.ID, body, log); err != nil {
			log.Warn("batch webhook not delivered", "err", err)
			return
		}
		log.Info("batch webhook delivered", "status", rec.Batch.Status)
	}()
}
