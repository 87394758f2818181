package embedgen

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// countingEncoder gives each input a vector of its length, or fails.
type countingEncoder struct {
	mu     sync.Mutex
	err    error
	widths [][]int
}

func (e *countingEncoder) steps() [][]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.widths)
}

func (e *countingEncoder) encode(inputs [][]int32) ([][]float32, error) {
	var step []int
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		step = append(step, len(in))
		out[i] = []float32{float32(len(in))}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.widths = append(e.widths, step)
	return out, e.err
}

func toks(n int) []int32 { return make([]int32, n) }

// submitLater submits inputs from a goroutine and returns its outcome.
func submitLater(ctx context.Context, s *scheduler, inputs ...[]int32) <-chan error {
	done := make(chan error, 1)
	go func() {
		vecs, err := s.submit(ctx, inputs)
		for i, v := range vecs {
			if err == nil && int(v[0]) != len(inputs[i]) {
				err = errors.New("a vector reached the wrong input")
			}
		}
		done <- err
	}()
	return done
}

func waitFor(t *testing.T, s *scheduler, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); s.queued() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d queued, want %d", s.queued(), n)
		}
	}
}

// A job whose caller left before its step is not computed; the others
// are, in order, within the step's bounds.
func TestSchedulerSkipsEndedJobs(t *testing.T) {
	enc := &countingEncoder{}
	s := newScheduler(enc, 10, 3, nil)
	gone, cancel := context.WithCancel(context.Background())
	left := submitLater(gone, s, toks(4), toks(4))
	waitFor(t, s, 2)
	kept := submitLater(context.Background(), s, toks(2), toks(3), toks(4), toks(5))
	waitFor(t, s, 6)
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled job: %v", err)
	}
	go s.loop()
	defer s.stop()
	if err := <-kept; err != nil {
		t.Fatal(err)
	}
	// 2+3+4 fit 10 tokens and 3 inputs; 5 goes alone.
	if got := enc.widths; len(got) != 2 || len(got[0]) != 3 || got[1][0] != 5 {
		t.Fatalf("steps %v: want [[2 3 4] [5]]", got)
	}
}

// An input longer than a step's tokens runs in a step of its own; those
// around it share steps within the bound.
func TestLongInputRunsAlone(t *testing.T) {
	enc := &countingEncoder{}
	s := newScheduler(enc, 10, 8, nil)
	done := submitLater(context.Background(), s, toks(4), toks(30), toks(4), toks(4))
	waitFor(t, s, 4)
	go s.loop()
	defer s.stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got, want := enc.steps(), [][]int{{4}, {30}, {4, 4}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("steps %v, want %v", got, want)
	}
}

// A failed step fails every job it held; a closed backend fails what
// waits.
func TestSchedulerFailures(t *testing.T) {
	enc := &countingEncoder{err: errors.New("engine fault")}
	s := newScheduler(enc, 100, 8, nil)
	a := submitLater(context.Background(), s, toks(3))
	b := submitLater(context.Background(), s, toks(3))
	waitFor(t, s, 2)
	go s.loop()
	for _, c := range []<-chan error{a, b} {
		if err := <-c; err == nil || err.Error() != "engine fault" {
			t.Fatalf("err %v, want the engine's fault", err)
		}
	}
	s.stop()

	s = newScheduler(enc, 100, 8, nil)
	c := submitLater(context.Background(), s, toks(3))
	waitFor(t, s, 1)
	close(s.quit) // the loop stops before it steps
	go s.loop()
	if err := <-c; !errors.Is(err, errStopped) {
		t.Fatalf("err %v, want %v", err, errStopped)
	}
	<-s.ended
}

// The jobs of a gathering share one step: the first to arrive waits for
// the others, and one that ends without inputs (refused, say) is not
// waited for. Jobs of no gathering step as they come.
func TestSchedulerWaitsForAGathering(t *testing.T) {
	enc := &countingEncoder{}
	s := newScheduler(enc, 100, 8, nil)
	go s.loop()
	defer s.stop()
	g := genq.NewGathering(4)
	var done []<-chan error
	for i := range 3 {
		ctx, _ := genq.WithGathering(context.Background(), g)
		done = append(done, submitLater(ctx, s, toks(i+1)))
		// Each waits for the rest: no step has run yet.
		waitFor(t, s, i+1)
		if len(enc.steps()) != 0 {
			t.Fatalf("a step of %v ran before the gathering was whole", enc.steps())
		}
	}
	_, refused := genq.WithGathering(context.Background(), g)
	refused()
	for _, d := range done {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-submitLater(context.Background(), s, toks(5)); err != nil {
		t.Fatal(err)
	}
	if got, want := enc.steps(), [][]int{{1, 2, 3}, {5}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("steps %v, want %v", got, want)
	}
}

// threadEncoder records the OS thread each step runs on.
type threadEncoder struct {
	mu   sync.Mutex
	tids map[int]int // thread id → steps
}

func (e *threadEncoder) encode(inputs [][]int32) ([][]float32, error) {
	e.mu.Lock()
	e.tids[syscall.Gettid()]++
	e.mu.Unlock()
	out := make([][]float32, len(inputs))
	for i, in := range inputs {
		out[i] = []float32{float32(len(in))}
	}
	return out, nil
}

// Every step runs on one OS thread, however the Go scheduler moves the
// loop between steps: ggml's OpenMP keeps a pool of threads per calling
// thread, and a loop that moved would leave pools behind.
func TestStepsKeepToOneThread(t *testing.T) {
	enc := &threadEncoder{tids: map[int]int{}}
	s := newScheduler(enc, 64, 4, nil)
	go s.loop()
	defer s.stop()
	const jobs = 200
	var wg sync.WaitGroup
	for i := range jobs {
		// Callers on other goroutines, some of them busy, keep every P
		// and several threads in use while the loop waits between steps.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := <-submitLater(context.Background(), s, toks(1+i%5)); err != nil {
				t.Error(err)
			}
		}()
		if i%10 == 0 {
			wg.Wait()
			runtime.Gosched()
		}
	}
	wg.Wait()
	if len(enc.tids) != 1 {
		t.Errorf("steps ran on %d OS threads (%v), want one", len(enc.tids), enc.tids)
	}
}

// gateEncoder holds its steps until the test closes the gate, then counts
// them as countingEncoder does.
type gateEncoder struct {
	countingEncoder
	gate chan struct{}
}

func (e *gateEncoder) encode(inputs [][]int32) ([][]float32, error) {
	<-e.gate
	return e.countingEncoder.encode(inputs)
}

// ones is n inputs of one token each.
func ones(n int) [][]int32 {
	out := make([][]int32, n)
	for i := range out {
		out[i] = toks(1)
	}
	return out
}

// TestSmallStepWaitsForMore: after a step of 8 inputs, a step that would
// hold 1 waits for more (here without a bound in time), and runs once it
// has half the last step's, as one step rather than two.
func TestSmallStepWaitsForMore(t *testing.T) {
	enc := &gateEncoder{gate: make(chan struct{})}
	s := newScheduler(enc, 100, 16, nil)
	s.fillWait = func(stepShape) time.Duration { return time.Minute }
	first := submitLater(context.Background(), s, ones(8)...)
	waitFor(t, s, 8)
	go s.loop()
	defer s.stop()
	for s.queued() != 0 { // the step of 8 is running
		time.Sleep(time.Millisecond)
	}
	lone := submitLater(context.Background(), s, ones(1)...)
	waitFor(t, s, 1)
	close(enc.gate) // this step ends, and no later one waits on the gate
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	rest := submitLater(context.Background(), s, ones(3)...)
	for _, done := range []<-chan error{lone, rest} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	want := [][]int{{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1}}
	if got := enc.steps(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("steps %v, want %v: the lone input waits for the next", got, want)
	}
}

// TestLoneCallerNeverWaits: after steps of fewer than minFillInputs
// inputs, a step runs as soon as its inputs come, however long the wait
// for more could be.
func TestLoneCallerNeverWaits(t *testing.T) {
	enc := &countingEncoder{}
	s := newScheduler(enc, 100, 16, nil)
	s.fillWait = func(stepShape) time.Duration { return time.Hour }
	go s.loop()
	defer s.stop()
	for range 3 {
		select {
		case err := <-submitLater(context.Background(), s, ones(minFillInputs-1)...):
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a lone caller's step waited for more inputs")
		}
	}
}
