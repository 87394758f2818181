package embedgen

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/worker"
)

// stepCounter is an encoder that counts the steps and the inputs of each.
type stepCounter struct {
	mu    sync.Mutex
	steps []int
}

func (c *stepCounter) encode(inputs [][]int32) ([][]float32, error) {
	c.mu.Lock()
	c.steps = append(c.steps, len(inputs))
	c.mu.Unlock()
	out := make([][]float32, len(inputs))
	for i := range out {
		out[i] = []float32{1, 0}
	}
	return out, nil
}

func (c *stepCounter) counted() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.steps)
}

// stepBackend is the embedding backend's Generate around a scheduler, with
// one input a job and no model.
type stepBackend struct {
	sched *scheduler
	info  genq.BackendInfo
}

func (b *stepBackend) Info() genq.BackendInfo { return b.info }
func (b *stepBackend) Close() error           { return nil }
func (b *stepBackend) Generate(ctx context.Context, _ genq.Job, _ func(genq.Progress)) (genq.Result, error) {
	if _, err := b.sched.submit(ctx, [][]int32{{101, 7, 102}}); err != nil {
		return genq.Result{}, err
	}
	return genq.Result{ContentType: "application/json", Data: []byte(`{}`)}, nil
}

// TestWaitingJobsShareOneStep: single-input jobs already waiting when the
// worker looks are pulled together, up to the step's inputs (the worker's
// gather), and run in as few engine steps as those bounds allow, not one
// step for the first job and another for the rest. Every job is answered
// once. Steps and their inputs are counted, not timed.
func TestWaitingJobsShareOneStep(t *testing.T) {
	tests := []struct {
		name          string
		jobs, gather  int
		slots         int
		wantStepSizes []int
	}{
		{name: "all in one step", jobs: 12, gather: 64, slots: 16, wantStepSizes: []int{12}},
		{name: "bounded by the step's inputs", jobs: 12, gather: 4, slots: 16, wantStepSizes: []int{4, 4, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
			conn := dialQueue(t, ns.ClientURL())
			nc, err := nats.Connect(ns.ClientURL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			replies, err := nc.SubscribeSync("_INBOX.gather.>")
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			for range tt.jobs {
				id := uuid.NewString()
				job := genq.Job{Envelope: genq.Envelope{ID: id, Variant: genq.VariantB, Text: "hi",
					Deadline: time.Now().Add(time.Minute), ReplyTo: "_INBOX.gather." + id}}
				if _, err := conn.Publish(t.Context(), job); err != nil {
					t.Fatal(err)
				}
			}

			enc := &stepCounter{}
			sched := newScheduler(enc, 4096, tt.gather, nil)
			go sched.loop()
			t.Cleanup(sched.stop)
			b := &stepBackend{sched: sched, info: genq.BackendInfo{Model: "steps", Slots: tt.slots, Gather: tt.gather}}
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan error, 1)
			rt := worker.New(worker.Config{WorkerID: "w1", Variant: genq.VariantB, PollWait: 200 * time.Millisecond, DrainGrace: 5 * time.Second},
				dialQueue(t, ns.ClientURL()), b, quietLog(), prometheus.NewRegistry())
			go func() { done <- rt.Run(ctx) }()
			t.Cleanup(func() { stop(); <-done })

			seen := map[string]int{}
			for range tt.jobs {
				m, err := replies.NextMsg(20 * time.Second)
				if err != nil {
					t.Fatalf("%d of %d jobs answered: %v", len(seen), tt.jobs, err)
				}
				seen[m.Subject]++
			}
			if extra, err := replies.NextMsg(300 * time.Millisecond); err == nil {
				t.Errorf("a job was answered twice: %s", extra.Subject)
			}
			if got := enc.counted(); !slices.Equal(got, tt.wantStepSizes) {
				t.Errorf("steps of %v inputs, want %v", got, tt.wantStepSizes)
			}
		})
	}
}

func dialQueue(t *testing.T, url string) *natsqueue.Conn {
	t.Helper()
	s := natsqueue.DefaultSettings()
	s.Memory = true
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: url}, s, quietLog(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
