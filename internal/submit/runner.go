// Package submit runs a JSON-lines file of prompts as jobs, straight on the
// queue, with a bounded number in flight, and records each result as it
// arrives in a journal that lets a rerun skip the jobs already done.
package submit

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/genq"
)

// Results is what the runner needs of the queue's results store and its
// cancel marks.
type Results interface {
	FetchResult(ctx context.Context, id string) (*genq.ReceivedResult, error)
	Uncancel(ctx context.Context, id string) error
}

// Jobs queues a job and waits for its result.
type Jobs interface {
	Run(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error)
}

// Config is how a batch runs.
type Config struct {
	Variant     genq.Variant
	Concurrency int           // jobs in flight at once
	Timeout     time.Duration // deadline of each job, queueing included
}

// Runner runs one batch.
type Runner struct {
	cfg     Config
	results Results
	jobs    Jobs
	journal *Journal
	// failedBefore are the ids whose last run failed (Journal.Outcomes).
	failedBefore map[string]bool

	total                         int
	ok, failed, skipped, inFlight atomic.Int64
}

// NewRunner builds a runner that records results in journal; image files
// go to the journal's directory.
func NewRunner(cfg Config, results Results, jobs Jobs, journal *Journal) *Runner {
	return &Runner{cfg: cfg, results: results, jobs: jobs, journal: journal}
}

// Run records the bad lines as failed, then runs every line not done, and
// prints progress every second and a summary at the end; a line that
// failed before runs under a fresh id. It fails when a job failed, when
// the batch was interrupted, or when a result could not be recorded.
func (b *Runner) Run(ctx context.Context, lines []Line, bad []Result, done, failed map[string]bool, progress io.Writer) error {
	b.total, b.failedBefore = len(lines)+len(bad), failed
	for _, r := range bad {
		b.failed.Add(1)
		if err := b.journal.Write(r); err != nil {
			return fmt.Errorf("writing results: %w", err)
		}
	}
	start := time.Now()
	stopProgress := b.showProgress(progress)
	sem := make(chan struct{}, b.cfg.Concurrency)
	var wg sync.WaitGroup
	var writeErr atomic.Value
	for i, l := range lines {
		if done[l.ID] {
			b.skipped.Add(1)
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		b.inFlight.Add(1)
		go func() {
			defer func() { <-sem; b.inFlight.Add(-1); wg.Done() }()
			if err := b.one(ctx, i+1, l); err != nil {
				writeErr.Store(err)
			}
		}()
	}
	wg.Wait()
	stopProgress()
	fmt.Fprintf(progress, "submitted %d jobs in %s: %d ok, %d failed, %d skipped as already done; results in %s\n",
		b.total, time.Since(start).Round(time.Millisecond), b.ok.Load(), b.failed.Load(), b.skipped.Load(), b.journal.Path())
	if err, _ := writeErr.Load().(error); err != nil {
		return fmt.Errorf("writing results: %w", err)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted; run the same command again to finish: %w", ctx.Err())
	}
	if n := b.failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d jobs failed; a rerun retries them", n, b.total)
	}
	return nil
}

// one runs a job, or collects its result from the store when an earlier,
// interrupted run of the same batch already got it done. A job that failed
// or was cancelled before runs again under a fresh id, which the queue's
// dedup window does not know; one never finished runs under its own id,
// its cancel mark (left by an interrupted run) withdrawn first.
func (b *Runner) one(ctx context.Context, line int, l Line) error {
	received, err := b.first(ctx, l)
	// A queue that did not take the job in time (a NATS cluster electing a
	// leader) may take it a moment later. Under a fresh id: the copy that
	// may still reach the stream is marked abandoned, and never runs.
	for try := 1; genq.ErrorCode(err) == genq.Unavailable && try < unavailableTries && pause(ctx, try); try++ {
		received, err = b.runJob(ctx, retryID(l.ID), l)
	}
	res := Result{ID: l.ID, Line: line}
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted, not failed: a rerun picks it up
		}
		b.failed.Add(1)
		res.Error, res.Code = genq.ErrorMessage(err), genq.ErrorCode(err)
		return b.journal.Write(res)
	}
	defer received.Body.Close()
	if err := b.save(&res, received); err != nil {
		b.failed.Add(1)
		res.Error, res.Code = err.Error(), genq.Internal
		return b.journal.Write(res)
	}
	b.ok.Add(1)
	return b.journal.Write(res)
}

// first is a job's first try in this run: its stored result, or the job
// run under its own id, or under a fresh one where the one it had is
// spent.
func (b *Runner) first(ctx context.Context, l Line) (*genq.ReceivedResult, error) {
	if b.failedBefore[l.ID] {
		// Its journal says it failed: the worker replies before it stores
		// the failure, so a rerun at once can find no stored result, and
		// its own id, still in the dedup window, would be the old failure.
		return b.runJob(ctx, retryID(l.ID), l)
	}
	received, err := b.fetch(ctx, l.ID)
	switch genq.ErrorCode(err) {
	case "", genq.Unavailable:
		return received, err
	case genq.NotFound:
		if uerr := b.results.Uncancel(ctx, l.ID); uerr != nil {
			return nil, genq.WrapError(genq.Unavailable, uerr, "could not withdraw the cancel of an earlier run")
		}
		received, err = b.runJob(ctx, l.ID, l)
		if genq.ErrorCode(err) == genq.Canceled && ctx.Err() == nil {
			// An earlier run's copy of the job, still queued under the
			// cancel mark, was dropped before the mark was withdrawn.
			received, err = b.runJob(ctx, retryID(l.ID), l)
		}
		return received, err
	default: // it failed or was cancelled before
		return b.runJob(ctx, retryID(l.ID), l)
	}
}

// unavailableTries bounds the tries of a job, or of the read of its stored
// result, that the queue answers with Unavailable: a cluster's election
// passes within them, a NATS that stays down does not.
const unavailableTries = 5

// pause waits before the next of unavailableTries, longer at each; it
// reports false when ctx ended.
func pause(ctx context.Context, try int) bool {
	d := time.Duration(try) * time.Second
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d/2 + rand.N(d)):
		return true
	}
}

// fetch reads the stored result of id, tried again while the store is
// unavailable.
func (b *Runner) fetch(ctx context.Context, id string) (*genq.ReceivedResult, error) {
	received, err := b.results.FetchResult(ctx, id)
	for try := 1; genq.ErrorCode(err) == genq.Unavailable && try < unavailableTries && pause(ctx, try); try++ {
		received, err = b.results.FetchResult(ctx, id)
	}
	return received, err
}

func (b *Runner) runJob(ctx context.Context, id string, l Line) (*genq.ReceivedResult, error) {
	job := genq.Job{Envelope: genq.Envelope{ID: id, Variant: b.cfg.Variant, Text: l.Text, Deadline: time.Now().Add(b.cfg.Timeout), Store: true}}
	jctx, cancel := context.WithDeadline(ctx, job.Deadline)
	defer cancel()
	// The result's body is read after cancel: a stored result is read
	// under its own timeout, not the job's context.
	return b.jobs.Run(jctx, job)
}

// retryID is a fresh id for another run of the job id: the id, cut to
// leave room, and a random suffix, within the id length limit.
func retryID(id string) string {
	const suffix = len("-retry-") + 8
	return id[:min(len(id), genq.MaxJobIDLen-suffix)] + "-retry-" + uuid.NewString()[:8]
}

// save puts a received result in res: a text inline, an image as a PNG
// file beside the journal, written whole or not at all.
func (b *Runner) save(res *Result, received *genq.ReceivedResult) error {
	if b.cfg.Variant.Kind() == genq.OutputText {
		var tr genq.TextResult
		if err := json.NewDecoder(received.Body).Decode(&tr); err != nil {
			return fmt.Errorf("decode result: %w", err)
		}
		res.GeneratedText = &tr.GeneratedText
		return nil
	}
	dir := b.journal.dir
	res.File = res.ID + ".png"
	final := filepath.Join(dir, res.File)
	tmp, err := os.CreateTemp(dir, ".partial-*.png")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, received.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", final, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// showProgress prints a status line every second until stopped.
func (b *Runner) showProgress(w io.Writer) func() {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(w, "[%d/%d] ok %d, failed %d, skipped %d, in flight %d\n",
					b.ok.Load()+b.failed.Load()+b.skipped.Load(), b.total, b.ok.Load(), b.failed.Load(), b.skipped.Load(), b.inFlight.Load())
			}
		}
	}()
	return func() { close(stop); <-done }
}
