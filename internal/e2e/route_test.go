package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/promtest"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
	"github.com/genq/genq/internal/worker"
)

// routedWorker is a real worker over the tiny model that takes routed
// jobs, with its own NATS connection (to cut, as SIGKILL would) and its
// own metrics.
type routedWorker struct {
	id  string
	nc  *nats.Conn
	reg *prometheus.Registry
}

func (s *stack) runRoutedWorker(id, modelPath string) *routedWorker {
	s.t.Helper()
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: modelPath, Slots: 2, Threads: 1, MaxNewTokens: 8, IgnoreEOS: true}, testLog(s.t))
	if err != nil {
		s.t.Fatal(err)
	}
	conn, nc := openConn(s.t, s.ns, s.settings, s.variant)
	w := &routedWorker{id: id, nc: nc, reg: prometheus.NewRegistry()}
	rt := worker.New(worker.Config{WorkerID: id, Variant: s.variant, PollWait: 500 * time.Millisecond,
		HeartbeatEvery: 500 * time.Millisecond, DrainGrace: time.Second, RetryDelay: 100 * time.Millisecond,
		RouteByPrefix: true, StealAfter: routeStealAfter},
		conn, b, testLog(s.t).With("worker_id", id), w.reg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	s.t.Cleanup(func() { cancel(); <-done; b.Close() })
	return w
}

// routeStealAfter is far above a turn's wait on an idle worker, so that a
// loaded machine cannot make the other worker steal a turn; a cut-off
// worker's turns are stolen once its heartbeat expires, sooner.
const routeStealAfter = 10 * time.Second

// taken is how many jobs the worker pulled from the given consumer.
func (w *routedWorker) taken(t *testing.T, from string) float64 {
	t.Helper()
	v, _ := promtest.Value(t, w.reg, "genq_worker_jobs_taken_total", "from", from)
	return v
}

func (w *routedWorker) takenAll(t *testing.T) float64 {
	return w.taken(t, "own") + w.taken(t, "shared") + w.taken(t, "stolen")
}

// TestConversationFollowsItsWorker: with ROUTE_BY_PREFIX and two real
// workers over the tiny model, every turn of a conversation runs on the
// worker that ran its first, from its own subject, and turns 2..n reuse
// the cached prefix; with that worker cut off, the next turns still
// complete, on the other.
func TestConversationFollowsItsWorker(t *testing.T) {
	s := newStack(t, stackOptions{})
	path := filepath.Join(t.TempDir(), tinygguf.FileName(genq.VariantB, "tiny"))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	workers := []*routedWorker{s.runRoutedWorker("w1", path), s.runRoutedWorker("w2", path)}
	s.waitLive(2)

	turn := func(messages []genq.Message) (string, chatUsage) {
		t.Helper()
		return s.chatTurn(t, filepath.Base(path), messages)
	}

	messages := []genq.Message{{Role: genq.RoleSystem, Content: "You are a sailor."}, {Role: genq.RoleUser, Content: "Tell me about the sea."}}
	answer, first := turn(messages)
	var served, other *routedWorker
	for i, w := range workers {
		if w.takenAll(t) == 1 {
			served, other = w, workers[1-i]
		}
	}
	if served == nil || served.taken(t, "own") != 1 {
		t.Fatalf("turn 1: w1 took %v, w2 %v jobs; want one routed to one of them", workers[0].takenAll(t), workers[1].takenAll(t))
	}
	const turns = 5
	prev := first.PromptTokens
	for n := 2; n <= turns; n++ {
		messages = append(messages, genq.Message{Role: genq.RoleAssistant, Content: answer}, genq.Message{Role: genq.RoleUser, Content: fmt.Sprintf("And question %d?", n)})
		var u chatUsage
		answer, u = turn(messages)
		if u.PromptTokensDetails == nil || u.PromptTokensDetails.CachedTokens < prev {
			t.Fatalf("turn %d of %d prompt tokens: details %+v, want at least turn %d's %d cached", n, u.PromptTokens, u.PromptTokensDetails, n-1, prev)
		}
		prev = u.PromptTokens
	}
	if got := served.taken(t, "own"); got != turns || other.takenAll(t) != 0 {
		t.Fatalf("%s took %v turns from its own subject, %s %v jobs; want all %d on %s", served.id, got, other.id, other.takenAll(t), turns, served.id)
	}

	// The worker that holds the conversation is cut off, as by SIGKILL:
	// the next turn goes to its subject while its heartbeat lives, and is
	// stolen once it has expired; the turns after it go to the other
	// worker's own subject.
	// Once its last turn is acked: a worker cut off between its reply and
	// its ack runs that turn again elsewhere, as on the shared queue.
	waitEmpty(t, s)
	served.nc.Close()
	for n := turns + 1; n <= turns+3; n++ {
		messages = append(messages, genq.Message{Role: genq.RoleAssistant, Content: answer}, genq.Message{Role: genq.RoleUser, Content: fmt.Sprintf("And question %d?", n)})
		answer, _ = turn(messages)
	}
	if got := other.takenAll(t); got != 3 || other.taken(t, "stolen") < 1 {
		t.Fatalf("%s took %v jobs (%v stolen) after %s was cut off, want the 3 turns, the first stolen", other.id, got, other.taken(t, "stolen"), served.id)
	}
	waitEmpty(t, s)
}

// waitEmpty waits until every queued job is acked.
func waitEmpty(t *testing.T, s *stack) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); s.streamMsgs() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d jobs left in the stream", s.streamMsgs())
		}
	}
}
