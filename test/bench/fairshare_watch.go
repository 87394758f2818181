package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// doneWatch reads the workers' logs as they grow and tells when each job
// was done ("job done", with its job_id and the log's time): a batch-lane
// job's latency is from its POST /v1/jobs answered to its worker's done,
// with no poll of the api in between.
type doneWatch struct {
	logs func() []string

	mu      sync.Mutex
	offsets map[string]int64
	done    map[string]time.Time
	waiters map[string][]chan time.Time
	// starts are the jobs the workers started, with their queue waits,
	// and startOf each one's index there by job id.
	starts  []jobStart
	startOf map[string]int
}

// jobStart is a worker's "job started" line, and its "job done" once read.
type jobStart struct {
	at     time.Time
	tenant string
	wait   time.Duration
	// ran is from its start to its done: run, reply and ack.
	ran time.Duration
}

func newDoneWatch(logs func() []string) *doneWatch {
	return &doneWatch{logs: logs, offsets: map[string]int64{}, done: map[string]time.Time{}, waiters: map[string][]chan time.Time{},
		startOf: map[string]int{}}
}

// run reads the logs every 2 ms until ctx ends.
func (w *doneWatch) run(ctx context.Context) {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, path := range w.logs() {
			w.read(path)
		}
	}
}

// read takes the whole lines path gained since the last read.
func (w *doneWatch) read(path string) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	w.mu.Lock()
	off := w.offsets[path]
	w.mu.Unlock()
	data, _ := io.ReadAll(io.NewSectionReader(f, off, 1<<40))
	end := bytes.LastIndexByte(data, '\n') + 1
	w.mu.Lock()
	defer w.mu.Unlock()
	w.offsets[path] = off + int64(end)
	for line := range bytes.SplitSeq(data[:end], []byte("\n")) {
		if bytes.Contains(line, []byte(`"msg":"job started"`)) {
			w.started(line)
			continue
		}
		if !bytes.Contains(line, []byte(`"msg":"job done"`)) {
			continue
		}
		var l struct {
			Time  time.Time `json:"time"`
			JobID string    `json:"job_id"`
		}
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		w.done[l.JobID] = l.Time
		if i, ok := w.startOf[l.JobID]; ok {
			w.starts[i].ran = l.Time.Sub(w.starts[i].at)
			delete(w.startOf, l.JobID)
		}
		for _, ch := range w.waiters[l.JobID] {
			ch <- l.Time
		}
		delete(w.waiters, l.JobID)
	}
}

// started notes a "job started" line; mu held.
func (w *doneWatch) started(line []byte) {
	var l struct {
		Time   time.Time `json:"time"`
		JobID  string    `json:"job_id"`
		Tenant string    `json:"tenant"`
		WaitUs int64     `json:"queue_wait_us"`
	}
	if json.Unmarshal(line, &l) == nil {
		w.startOf[l.JobID] = len(w.starts)
		w.starts = append(w.starts, jobStart{at: l.Time, tenant: l.Tenant, wait: time.Duration(l.WaitUs) * time.Microsecond})
	}
}

// onWorker is the p50s of the queue waits and of the start-to-done times
// of tenant's jobs started within spans.
func (w *doneWatch) onWorker(tenant string, spans [][2]time.Time) (wait, ran time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var waits, rans []time.Duration
	for _, j := range w.starts {
		for _, sp := range spans {
			if j.tenant == tenant && !j.at.Before(sp[0]) && j.at.Before(sp[1]) {
				waits = append(waits, j.wait)
				if j.ran > 0 {
					rans = append(rans, j.ran)
				}
			}
		}
	}
	return p50(waits), p50(rans)
}

// wait is when job id was done.
func (w *doneWatch) wait(ctx context.Context, id string) (time.Time, error) {
	ch := make(chan time.Time, 1)
	w.mu.Lock()
	if at, ok := w.done[id]; ok {
		w.mu.Unlock()
		return at, nil
	}
	w.waiters[id] = append(w.waiters[id], ch)
	w.mu.Unlock()
	select {
	case at := <-ch:
		return at, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("job %s: not done: %w", id, ctx.Err())
	}
}
