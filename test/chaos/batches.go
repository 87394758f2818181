package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/test/localstack"
)

// The Batch API under faults: a batch of chat requests runs while the api
// that accepted it is killed (another api on the same NATS finishes it), a
// worker is killed, or NATS restarts. Each time the batch completes with
// every custom_id in its output exactly once, and no request runs twice.

const batchLines = 60

// A batch request's answer: long enough, on workers of one batch slot each
// (SLOTS=2, one kept for interactive jobs), that the batch is still running
// when its fault comes, a few seconds in all. Each scenario checks that it
// was.
const batchTokens = 1500

var batchEnv = []string{"SLOTS=2", "TEXT_MAX_NEW_TOKENS=" + strconv.Itoa(batchTokens), "TEXT_IGNORE_EOS=true"}

// stillRunning fails a scenario whose batch ended before its fault.
func stillRunning(b localstack.BatchStatus) error {
	if b.Status != "in_progress" || b.RequestCounts.Completed >= batchLines {
		return fmt.Errorf("the batch was %s with %+v when its fault came: the scenario tests nothing", b.Status, b.RequestCounts)
	}
	return nil
}

// judgeBatch checks a batch of tenant name, read through client, ended
// completed with every custom_id once in its output, and reports it. Each
// line in the output is a request the tenant's counters must hold.
func judgeBatch(ctx context.Context, e env, client *http.Client, name, url string, b localstack.BatchStatus, s *localstack.Stack, t0 time.Time, note string) (localstack.Report, error) {
	rep := localstack.Summarize("", nil, workerLogs(s))
	rep.Sent = batchLines
	if b.Status != "completed" || b.OutputFileID == nil {
		return rep, fmt.Errorf("batch %s ended %s with %+v", b.ID, b.Status, b.RequestCounts)
	}
	seen, err := localstack.BatchOutput(ctx, client, url, b)
	if err != nil {
		return rep, err
	}
	e.ten.answeredLines(name, len(seen))
	for i := range batchLines {
		switch n := seen["b-"+strconv.Itoa(i)]; {
		case n == 1:
			rep.OK++
		case n == 0:
			rep.Lost++
		default:
			rep.Duplicated++
		}
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("%s; batch of %d completed in %s, %d answered, %d failed", note, batchLines,
		time.Since(t0).Round(100*time.Millisecond), b.RequestCounts.Completed, b.RequestCounts.Failed))
	if rep.OK != batchLines {
		return rep, errors.New("the output does not hold every custom_id exactly once")
	}
	return rep, nil
}

// batchAPIKilled: the api that accepted a batch is killed with SIGKILL
// mid-batch; a second api on the same NATS takes the batch's lease when it
// lapses and finishes it.
func batchAPIKilled(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-api-killed", "B", 2, batchEnv...)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	client, name := e.ten.clientAs(0)
	port, err := localstack.FreePort()
	if err != nil {
		return localstack.Report{}, err
	}
	other := "http://127.0.0.1:" + strconv.Itoa(port)
	api2, err := localstack.Start("api2", s.Bin.API, nil, slices.Concat([]string{"VARIANT=" + s.Variant, "NATS_URL=" + s.NATSURL(),
		"ADDR=127.0.0.1:" + strconv.Itoa(port), "METRICS_ADDR=127.0.0.1:0"}, s.Env, s.APIEnv), s.Dir)
	if err != nil {
		return localstack.Report{}, err
	}
	defer func() { _ = api2.Stop(5 * time.Second) }()
	if err := localstack.WaitHTTP(ctx, other+"/readiness"); err != nil {
		return localstack.Report{}, err
	}
	t0 := time.Now()
	id, err := localstack.StartBatch(ctx, client, s.URL(), localstack.ChatBatchInput(batchLines, batchTokens))
	if err != nil {
		return localstack.Report{}, err
	}
	at, err := localstack.WaitBatch(ctx, client, s.URL(), id, func(b localstack.BatchStatus) bool { return b.RequestCounts.Completed >= 5 })
	if err != nil {
		return localstack.Report{}, err
	}
	s.API.Kill()
	if err := stillRunning(at); err != nil {
		return localstack.Report{}, err
	}
	b, err := localstack.WaitBatch(ctx, client, other, id, func(b localstack.BatchStatus) bool {
		return b.Status != "in_progress" && b.Status != "validating" && b.Status != "finalizing"
	})
	if err != nil {
		return localstack.Report{}, err
	}
	return judgeBatch(ctx, e, client, name, other, b, s, t0, "the accepting api killed after 5 answers; the other api took the batch's lease (15 s) and finished it")
}

// batchWorkerKilled: one of two workers is killed with SIGKILL mid-batch
// and replaced.
func batchWorkerKilled(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-worker-killed", "B", 2, batchEnv...)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	client, name := e.ten.clientAs(1)
	t0 := time.Now()
	victim := s.Workers()[0]
	killAndReplace(ctx, s, `"msg":"job started"`, 500*time.Millisecond)
	id, err := localstack.StartBatch(ctx, client, s.URL(), localstack.ChatBatchInput(batchLines, batchTokens))
	if err != nil {
		return localstack.Report{}, err
	}
	b, err := localstack.WaitBatch(ctx, client, s.URL(), id, func(b localstack.BatchStatus) bool { return b.Status == "completed" || b.Status == "failed" })
	if err != nil {
		return localstack.Report{}, err
	}
	// Killed mid-job: a batch request it started had not ended.
	if log := victim.Log(); !victim.Exited() || strings.Count(log, `"msg":"job started"`) <= strings.Count(log, `"msg":"job done"`) {
		return localstack.Report{}, errors.New("the worker was not killed while it ran a batch request: the scenario tests nothing")
	}
	return judgeBatch(ctx, e, client, name, s.URL(), b, s, t0, "1 of 2 workers killed mid-batch, running a request, and replaced; ack wait 3s")
}

// batchNATSRestart: the nats-server is stopped mid-batch and started again
// two seconds later on the same storage.
func batchNATSRestart(ctx context.Context, e env) (localstack.Report, error) {
	s, err := newStack(ctx, e, "batch-nats-restart", "B", 2, batchEnv...)
	if err != nil {
		return localstack.Report{}, err
	}
	defer s.Close()
	client, name := e.ten.clientAs(0)
	t0 := time.Now()
	id, err := localstack.StartBatch(ctx, client, s.URL(), localstack.ChatBatchInput(batchLines, batchTokens))
	if err != nil {
		return localstack.Report{}, err
	}
	at, err := localstack.WaitBatch(ctx, client, s.URL(), id, func(b localstack.BatchStatus) bool { return b.RequestCounts.Completed >= 5 })
	if err != nil {
		return localstack.Report{}, err
	}
	_ = s.NATS.Stop(10 * time.Second)
	if err := stillRunning(at); err != nil {
		return localstack.Report{}, err
	}
	time.Sleep(2 * time.Second)
	if err := s.StartNATS(ctx); err != nil {
		return localstack.Report{}, err
	}
	b, err := localstack.WaitBatch(ctx, client, s.URL(), id, func(b localstack.BatchStatus) bool { return b.Status == "completed" || b.Status == "failed" })
	if err != nil {
		return localstack.Report{}, err
	}
	return judgeBatch(ctx, e, client, name, s.URL(), b, s, t0, "nats-server down 2 s after 5 answers")
}
