package natsqueue

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
)

// testServer is an embedded nats-server that a test can stop and start
// again on the same port and storage, as an operator restarts NATS.
type testServer struct {
	t    *testing.T
	dir  string
	port int
	ns   *server.Server
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	s := &testServer{t: t, dir: t.TempDir(), port: -1}
	s.start()
	u, _ := url.Parse(s.ns.ClientURL())
	s.port, _ = strconv.Atoi(u.Port())
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) start() {
	ns, err := natsembed.Start(natsembed.Options{Port: s.port, StoreDir: s.dir})
	if err != nil {
		s.t.Fatal(err)
	}
	s.ns = ns
}

func (s *testServer) stop() { s.ns.Shutdown(); s.ns.WaitForShutdown() }

func (s *testServer) dial() *Conn {
	s.t.Helper()
	st := DefaultSettings()
	st.AckWait = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, ConnectOptions{URL: s.ns.ClientURL()}, st, slog.New(slog.NewTextHandler(io.Discard, nil)), genq.VariantB)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(c.Close)
	return c
}

func testJob() genq.Job {
	return genq.Job{Envelope: genq.Envelope{ID: uuid.NewString(), Variant: genq.VariantB, Text: "hi", Deadline: time.Now().Add(time.Minute)}}
}

// A publish while NATS is down gives up with Unavailable after its bound,
// not at the caller's deadline; one that NATS comes back for is queued once.
func TestPublishThroughAnOutage(t *testing.T) {
	tests := []struct {
		name     string
		downFor  time.Duration // 0: NATS does not come back
		wantCode genq.Code
	}{
		{"NATS stays down", 0, genq.Unavailable},
		{"NATS comes back", 1500 * time.Millisecond, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newTestServer(t)
			c := s.dial()
			s.stop()
			if tt.downFor > 0 {
				time.AfterFunc(tt.downFor, s.start)
			}
			job := testJob()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			dup, err := c.publish(ctx, job, Interactive, "", 300*time.Millisecond, 5*time.Second, false)
			if took := time.Since(start); took > 8*time.Second {
				t.Errorf("publish took %s, bound 5s", took)
			}
			// A copy buffered while NATS was down may reach it before the
			// one whose PubAck comes back: then this one is the duplicate.
			_ = dup
			if genq.ErrorCode(err) != tt.wantCode {
				t.Fatalf("publish: %v; want code %q", err, tt.wantCode)
			}
			if tt.wantCode != "" {
				return
			}
			st, err := c.js.Stream(ctx, JobsStream)
			if err != nil {
				t.Fatal(err)
			}
			if info, err := st.Info(ctx); err != nil || info.State.Msgs != 1 {
				t.Errorf("the queue holds %d messages (%v), want the job once", info.State.Msgs, err)
			}
		})
	}
}

// A caller polling for a result keeps polling through a results store that
// fails for a while, and gets the result once it is there.
func TestRunPollsThroughAStoreOutage(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dial()
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	job := testJob()
	job.Store = true
	// Queued once already: Run finds a duplicate and polls the store.
	if _, err := c.Publish(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	js := c.js
	if err := js.DeleteObjectStore(t.Context(), ResultsBucket); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		a, err := cl.Run(ctx, job)
		if err == nil {
			a.Body.Close()
		}
		got <- err
	}()
	time.Sleep(1500 * time.Millisecond) // polls that fail
	if err := ensure(t.Context(), js, c.settings, []genq.Variant{genq.VariantB}); err != nil {
		t.Fatal(err)
	}
	h := nats.Header{}
	h.Set(HeaderStatus, StatusOK)
	if err := c.store(t.Context(), job, []byte(`{"generated_text":"HI"}`), h, storeFloor); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Run: %v; want the stored result", err)
	}
}

// A stored result opened before the caller's deadline is read whole even
// when the deadline passes while it is read.
func TestStoredResultReadPastTheDeadline(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	c := s.dial()
	job := testJob()
	data := bytes.Repeat([]byte("png!"), 1<<20) // 4 MiB, 32 chunks
	h := nats.Header{}
	h.Set(HeaderStatus, StatusOK)
	if err := c.store(t.Context(), job, data, h, storeFloor); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	a, err := c.FetchResult(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(a.Body, head); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	time.Sleep(100 * time.Millisecond)
	rest, err := io.ReadAll(a.Body)
	if err != nil || len(head)+len(rest) != len(data) {
		t.Fatalf("read %d of %d bytes: %v", len(head)+len(rest), len(data), err)
	}
}
