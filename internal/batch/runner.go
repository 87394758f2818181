package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsqueue"
)

// submitConfig is what the flags and the environment say.
type submitConfig struct {
	variant     genq.Variant
	in, out     string
	concurrency int
	timeout     time.Duration
	strict      bool
	nats        natsqueue.ConnectOptions
	queue       natsqueue.Settings
}

// batchLine is one line of the input file.
type batchLine struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// batchResult is one line of results.jsonl.
type batchResult struct {
	ID            string    `json:"id"`
	Line          int       `json:"line"`
	GeneratedText *string   `json:"generated_text,omitempty"`
	File          string    `json:"file,omitempty"`
	Error         string    `json:"error,omitempty"`
	Code          genq.Code `json:"code,omitempty"`
}

// resultsFile is the JSON-lines record of a batch, in its output directory.
const resultsFile = "results.jsonl"

// namespaceBatch derives job ids from the input, so a rerun of the same file
// gets the same ids: the queue drops its duplicates and the results store
// still holds what the first run finished.
var namespaceBatch = uuid.MustParse("6f1b4b8e-8f7e-4a53-9e57-3c1d7a3f0b2a")

// runSubmit handles "genqctl submit": it publishes every prompt of a JSON-lines
// file as a job, straight onto NATS, with a bounded number in flight, and
// writes each result as it arrives. A rerun skips the jobs already done.
func runSubmit(ctx context.Context, args []string, e env) error {
	cfg, err := parseSubmitFlags(args, e)
	if err != nil {
		return err
	}
	lines, bad, err := readBatch(cfg.in, cfg.variant)
	if err != nil {
		return err
	}
	for _, b := range bad {
		fmt.Fprintf(e.stderr, "%s line %d: %s\n", cfg.in, b.Line, b.Error)
	}
	if cfg.strict && len(bad) > 0 {
		return fmt.Errorf("%d bad lines in %s; nothing was submitted (--strict)", len(bad), cfg.in)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if err := compactResults(cfg.out); err != nil {
		return err
	}
	done, err := finishedJobs(cfg.out)
	if err != nil {
		return err
	}
	log, err := logging.New(e.stderr, "warn", "genqctl")
	if err != nil {
		return err
	}
	cfg.nats.Name = "genqctl-submit"
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := natsqueue.Dial(openCtx, cfg.nats, cfg.queue, log, cfg.variant)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Batch jobs have their own capacity and yield to interactive ones, so
	// a large submit neither fills the api's queue nor delays its callers.
	client, err := natsqueue.NewBatchClient(conn)
	if err != nil {
		return err
	}
	defer client.Close()

	rec, err := openRecorder(cfg.out)
	if err != nil {
		return err
	}
	b := &batch{cfg: cfg, conn: conn, client: client, rec: rec, total: len(lines) + len(bad)}
	for _, r := range bad {
		b.failed.Add(1)
		if err := rec.write(r); err != nil {
			rec.close()
			return fmt.Errorf("writing results: %w", err)
		}
	}
	err = b.run(ctx, lines, done, e.stderr)
	rec.close()
	// A rerun appends the new outcome of a job that failed before: keep
	// one line per id, the last.
	return errors.Join(err, compactResults(cfg.out))
}

func parseSubmitFlags(args []string, e env) (submitConfig, error) {
	var cfg submitConfig
	var variant string
	fs := envflag.New("genqctl submit", e.getenv, e.stderr)
	fs.String(&variant, "variant", "VARIANT", "B", "variant of the jobs: A, B or C")
	fs.String(&cfg.in, "in", "", "", "JSON-lines input: one {\"text\": …} per line, with an optional \"id\"")
	fs.String(&cfg.out, "out", "", "results", "output directory: results.jsonl, and one PNG per job for images")
	fs.Int(&cfg.concurrency, "concurrency", "SUBMIT_CONCURRENCY", 16, "jobs in flight at once")
	fs.Duration(&cfg.timeout, "timeout", "SUBMIT_TIMEOUT", 30*time.Minute, "deadline of each job, queueing included")
	fs.Bool(&cfg.strict, "strict", "", false, "abort before submitting anything when a line is bad (default: report it and go on)")
	cfg.nats.RegisterFlags(fs, "nats://127.0.0.1:4222")
	cfg.queue.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, flagError(err)
	}
	v, err := genq.ParseVariant(variant)
	if err != nil {
		return cfg, usageError{err.Error()}
	}
	cfg.variant = v
	switch {
	case cfg.in == "":
		return cfg, usageError{"--in is required"}
	case cfg.concurrency < 1:
		return cfg, usageError{"--concurrency must be at least 1"}
	case cfg.timeout <= 0:
		return cfg, usageError{"--timeout must be positive"}
	}
	return cfg, nil
}

// readBatch reads and checks the whole input before anything is queued. A
// bad line is returned as a failed result and the rest goes on; err is for
// an input that cannot be read at all.
func readBatch(path string, v genq.Variant) (lines []batchLine, bad []batchResult, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		var l batchLine
		if err := json.Unmarshal(raw, &l); err != nil {
			bad = append(bad, badLine(l.ID, n, err.Error()))
			continue
		}
		if l.ID == "" {
			l.ID = uuid.NewSHA1(namespaceBatch, []byte(string(v)+"\x00"+strconv.Itoa(n)+"\x00"+l.Text)).String()
		}
		if err := (genq.Job{ID: l.ID, Variant: v, Text: l.Text}).Validate(); err != nil {
			bad = append(bad, badLine(l.ID, n, genq.ErrorMessage(err)))
			continue
		}
		if prev, dup := seen[l.ID]; dup {
			bad = append(bad, badLine(l.ID, n, fmt.Sprintf("id %q already used on line %d", l.ID, prev)))
			continue
		}
		seen[l.ID] = n
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	return lines, bad, nil
}

// badLine is the result of a line that was never submitted. A line with no
// usable id is recorded under its line number.
func badLine(id string, n int, reason string) batchResult {
	if genq.ValidateJobID(id) != nil {
		id = "line-" + strconv.Itoa(n)
	}
	return batchResult{ID: id, Line: n, Error: reason, Code: genq.Invalid}
}

// compactResults rewrites results.jsonl with one line per id, the last
// written; torn lines are dropped.
func compactResults(dir string) error {
	path := filepath.Join(dir, resultsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var order []string
	last := map[string][]byte{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var r batchResult
		if json.Unmarshal(line, &r) != nil || r.ID == "" {
			continue
		}
		if _, ok := last[r.ID]; !ok {
			order = append(order, r.ID)
		}
		last[r.ID] = line
	}
	var out bytes.Buffer
	for _, id := range order {
		out.Write(last[id])
		out.WriteByte('\n')
	}
	if bytes.Equal(out.Bytes(), data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// finishedJobs lists the ids that results.jsonl records as done.
func finishedJobs(dir string) (map[string]bool, error) {
	done := map[string]bool{}
	f, err := os.Open(filepath.Join(dir, resultsFile))
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r batchResult
		// A torn last line from an interrupted run is simply not done.
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Error == "" {
			if r.File == "" || fileExists(filepath.Join(dir, r.File)) {
				done[r.ID] = true
			}
		}
	}
	return done, sc.Err()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// recorder appends result lines, one write per line, synced as it goes.
type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func openRecorder(dir string) (*recorder, error) {
	f, err := os.OpenFile(filepath.Join(dir, resultsFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f}, nil
}

func (r *recorder) write(res batchResult) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err = r.f.Write(append(b, '\n'))
	return err
}

func (r *recorder) close() error { return r.f.Close() }

type batch struct {
	cfg    submitConfig
	conn   *natsqueue.Conn
	client *natsqueue.Client
	rec    *recorder
	total  int

	ok, failed, skipped, inFlight atomic.Int64
}

func (b *batch) run(ctx context.Context, lines []batchLine, done map[string]bool, progress io.Writer) error {
	start := time.Now()
	stopProgress := b.showProgress(progress)
	sem := make(chan struct{}, b.cfg.concurrency)
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
		b.total, time.Since(start).Round(time.Millisecond), b.ok.Load(), b.failed.Load(), b.skipped.Load(), filepath.Join(b.cfg.out, resultsFile))
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
func (b *batch) one(ctx context.Context, line int, l batchLine) error {
	answer, err := b.conn.FetchResult(ctx, l.ID)
	switch code := genq.ErrorCode(err); code {
	case "", genq.Unavailable:
	case genq.NotFound:
		if uerr := b.conn.Uncancel(ctx, l.ID); uerr != nil {
			err = genq.WrapError(genq.Unavailable, uerr, "could not withdraw the cancel of an earlier run")
			break
		}
		answer, err = b.runJob(ctx, l.ID, l)
		if genq.ErrorCode(err) == genq.Canceled && ctx.Err() == nil {
			// An earlier run's copy of the job, still queued under the
			// cancel mark, was dropped before the mark was withdrawn.
			answer, err = b.runJob(ctx, retryID(l.ID), l)
		}
	default:
		answer, err = b.runJob(ctx, retryID(l.ID), l)
	}
	res := batchResult{ID: l.ID, Line: line}
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted, not failed: a rerun picks it up
		}
		b.failed.Add(1)
		res.Error, res.Code = genq.ErrorMessage(err), genq.ErrorCode(err)
		return b.rec.write(res)
	}
	defer answer.Body.Close()
	if err := b.save(&res, answer); err != nil {
		b.failed.Add(1)
		res.Error, res.Code = err.Error(), genq.Internal
		return b.rec.write(res)
	}
	b.ok.Add(1)
	return b.rec.write(res)
}

func (b *batch) runJob(ctx context.Context, id string, l batchLine) (*genq.ReceivedResult, error) {
	job := genq.Job{ID: id, Variant: b.cfg.variant, Text: l.Text, Deadline: time.Now().Add(b.cfg.timeout), Store: true}
	jctx, cancel := context.WithDeadline(ctx, job.Deadline)
	defer cancel()
	// The answer's body is read after cancel: a stored result is read
	// under its own timeout, not the job's context.
	return b.client.Run(jctx, job)
}

// retryID is a fresh id for another run of the job id: the id, cut to
// leave room, and a random suffix, within the id length limit.
func retryID(id string) string {
	const suffix = len("-retry-") + 8
	return id[:min(len(id), genq.MaxJobIDLen-suffix)] + "-retry-" + uuid.NewString()[:8]
}

func (b *batch) save(res *batchResult, answer *genq.ReceivedResult) error {
	if b.cfg.variant.Kind() == genq.OutputText {
		var tr genq.TextResult
		if err := json.NewDecoder(answer.Body).Decode(&tr); err != nil {
			return fmt.Errorf("decode result: %w", err)
		}
		res.GeneratedText = &tr.GeneratedText
		return nil
	}
	res.File = res.ID + ".png"
	final := filepath.Join(b.cfg.out, res.File)
	tmp, err := os.CreateTemp(b.cfg.out, ".partial-*.png")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, answer.Body); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", final, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// showProgress prints a status line every second until stopped.
func (b *batch) showProgress(w io.Writer) func() {
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
