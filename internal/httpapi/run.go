package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/genq/genq/internal/genq"
)

// runFunc queues a job and waits for its result: Jobs.Run, or a streaming
// job's StreamJobs.RunStream.
type runFunc func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error)

// runJob runs job with run until ctx ends: the job's deadline, queueing
// included, or the client going away, which cancels the job. It counts
// the job and logs its failure; the error it returns is the one to answer
// with. The caller closes a returned result's body.
func (s *Server) runJob(ctx context.Context, job genq.Job, start time.Time, log *slog.Logger, run runFunc) (*genq.ReceivedResult, error) {
	s.metrics.inFlight.Inc()
	res, err := run(s.withShare(ctx), job)
	s.metrics.inFlight.Dec()
	s.recent.add(time.Now(), time.Since(start), err == nil)
	if err != nil && errors.Is(context.Cause(ctx), errShuttingDown) {
		err = errShuttingDown // the job is cancelled; the caller may retry elsewhere
	}
	if err != nil {
		code := genq.ErrorCode(err)
		s.metrics.generateSeconds.WithLabelValues(string(code)).Observe(time.Since(start).Seconds())
		if code == genq.Overloaded {
			s.metrics.rejections.WithLabelValues("queue_full").Inc()
		}
		if code != genq.Invalid { // a refusal is logged once, with the answer that says it (logAnswered)
			log.Info("generate failed", "code", code, "err", err, "ms", time.Since(start).Milliseconds())
		}
		return nil, err
	}
	if c := callerOf(ctx); c != nil {
		c.addResult(res, s.modelOf(res.Worker, ""))
	}
	s.metrics.queueWait.Observe(res.QueueWait.Seconds())
	s.metrics.jobSeconds.Observe(res.RunTime.Seconds())
	if res.Attempt > 1 {
		s.metrics.redeliveries.Inc()
	}
	return res, nil
}

// logDone logs a job's success, with how long it queued and ran.
func logDone(log *slog.Logger, start time.Time, res *genq.ReceivedResult, more ...any) {
	log.Info("generate done", append([]any{"ms", time.Since(start).Milliseconds(), "queue_wait_ms", res.QueueWait.Milliseconds(),
		"run_ms", res.RunTime.Milliseconds(), "attempt", res.Attempt, "worker", res.Worker}, more...)...)
}

// runAll runs one request's jobs at once (its images, its choices) and
// returns their results in order. The first failure cancels the rest: the
// caller gets an error, not part of what it asked for, and the error is
// the first real failure, not the cancellations it caused.
func runAll[T any](ctx context.Context, jobs []genq.Job, run func(context.Context, int, genq.Job) (T, error)) ([]T, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]T, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Go(func() {
			if out[i], errs[i] = run(ctx, i, job); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		if err != nil && (first == nil || genq.ErrorCode(first) == genq.Canceled) {
			first = err
		}
	}
	return out, first
}

// readTextResult reads a text result: its JSON as the worker wrote it, and
// decoded.
func readTextResult(res *genq.ReceivedResult) (json.RawMessage, genq.TextResult, error) {
	var out genq.TextResult
	data, err := io.ReadAll(io.LimitReader(res.Body, genq.MaxTextResultBytes))
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		return nil, out, fmt.Errorf("read the text result: %w", err)
	}
	return data, out, nil
}

// textOf reads the text result of a job that ran (res and err are what a
// run or an outcome returned) and closes its body.
func textOf(res *genq.ReceivedResult, err error) (genq.TextResult, error) {
	if err != nil {
		return genq.TextResult{}, err
	}
	defer res.Body.Close()
	_, text, err := readTextResult(res)
	return text, err
}

// maxImageResult bounds the PNG the api reads into memory to encode it.
const maxImageResult = 64 << 20

func readImage(res *genq.ReceivedResult) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(res.Body, maxImageResult))
	if err != nil {
		return nil, fmt.Errorf("read the image: %w", err)
	}
	return data, nil
}
