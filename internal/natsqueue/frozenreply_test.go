package natsqueue

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// TestReplyGetsThroughTheWorkersFrozenServer: the worker's server freezes
// as the worker replies, while the producer, connected elsewhere, stays
// connected and so never looks in the store. The reply, sent as a request
// for a receipt, dies with the frozen server; the worker reconnects and
// stores the result. It must then send the reply again, or the caller
// waits out its deadline for a job that is done (make chaos-cluster, "job
// stream's leader frozen", issue 54).
func TestReplyGetsThroughTheWorkersFrozenServer(t *testing.T) {
	s := newTestServer(t)
	cl, err := NewClient(s.dial())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newFreezingProxy(t, s.ns.Addr().String())
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st := DefaultSettings()
	st.AckWait = 10 * time.Second
	w, err := Dial(ctx, ConnectOptions{URL: "nats://" + proxy.addr()}, st, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	w.storeTry = time.Second // the Put swallowed by the freeze is given up sooner
	p, err := w.NewPuller(ctx, genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}

	job := testJob()
	answer := make(chan error, 1)
	go func() {
		// Well past the worker's recovery (a receipt's wait, a reconnect
		// and a second Put: a few seconds), well within the job's minute.
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		r, err := cl.Run(rctx, job)
		if err == nil {
			var b []byte
			b, err = io.ReadAll(r.Body)
			r.Body.Close()
			if err == nil && string(b) != "answer" {
				err = genq.Errorf(genq.Internal, "the caller got %q", b)
			}
		}
		answer <- err
	}()
	d := pullJob(t, p, job.ID)

	proxy.freeze()
	completed := make(chan error, 1)
	go func() {
		completed <- d.Complete(ctx, genq.Result{ContentType: "text/plain", Data: []byte("answer")}, ReplyMeta{Worker: "w1"})
	}()
	// The reply's request is unconfirmed, so its bytes went into the
	// frozen link; only then does the worker notice its server is gone.
	waitLog(t, logs, "reply not confirmed; storing the result", 10*time.Second)
	proxy.cut()

	if err := <-completed; err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := <-answer; err != nil {
		t.Fatalf("the caller, connected to a server that never froze, got %v; want the answer", err)
	}
}

// waitLog waits until logs hold line.
func waitLog(t *testing.T, logs *lockedBuffer, line string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); !strings.Contains(logs.String(), line); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the logs within %s:\n%s", line, within, logs.String())
		}
	}
}

// freezingProxy forwards TCP to a NATS server, and plays that server
// freezing (SIGSTOP): its links swallow every byte each way, as a
// process that reads nothing and answers nothing does, until they are cut.
type freezingProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	links []*frozenLink
}

// frozenLink is one client's connection through the proxy.
type frozenLink struct {
	down, up net.Conn
	frozen   atomic.Bool
}

func newFreezingProxy(t *testing.T, upstream string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, upstream: upstream}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.cut(); wg.Wait() })
	wg.Go(p.serve)
	return p
}

func (p *freezingProxy) addr() string { return p.ln.Addr().String() }

func (p *freezingProxy) serve() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			down.Close()
			continue
		}
		l := &frozenLink{down: down, up: up}
		p.mu.Lock()
		p.links = append(p.links, l)
		p.mu.Unlock()
		go l.copy(up, down)
		go l.copy(down, up)
	}
}

// freeze makes every link swallow what either side sends.
func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.frozen.Store(true)
	}
}

// cut closes every link, as a client does once it judges its server dead;
// what the frozen links swallowed is gone. New links go through.
func (p *freezingProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.down.Close()
		l.up.Close()
	}
	p.links = nil
}

// copy copies src to dst until either closes, dropping what it reads
// while the link is frozen.
func (l *frozenLink) copy(dst, src net.Conn) {
	b := make([]byte, 32<<10)
	for {
		n, err := src.Read(b)
		if n > 0 && !l.frozen.Load() {
			if _, werr := dst.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}
