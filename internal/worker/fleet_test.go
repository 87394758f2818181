package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/promtest"
)

// fleetLoads records the loads and closes of fake models.
type fleetLoads struct {
	mu     sync.Mutex
	loads  []string
	closes []string
	fail   map[string]error
}

type namedBackend struct {
	name string
	rec  *fleetLoads
}

func (b *namedBackend) Info() genq.BackendInfo { return genq.BackendInfo{Model: b.name, Slots: 1} }
func (b *namedBackend) Generate(context.Context, genq.Job, func(genq.Progress)) (genq.Result, error) {
	return genq.Result{Data: []byte(b.name)}, nil
}
func (b *namedBackend) Close() error {
	b.rec.mu.Lock()
	defer b.rec.mu.Unlock()
	b.rec.closes = append(b.rec.closes, b.name)
	return nil
}

func (r *fleetLoads) load(_ context.Context, m genq.Model, progress func(float64)) (genq.Backend, error) {
	progress(0.5)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.loads = append(r.loads, m.Name)
	if err := r.fail[m.Name]; err != nil {
		return nil, err
	}
	return &namedBackend{name: m.Name, rec: r}, nil
}

func (r *fleetLoads) events() (loads, closes string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.loads, ","), strings.Join(r.closes, ",")
}

func fleetModels(names ...string) []genq.Model {
	var ms []genq.Model
	for _, n := range names {
		ms = append(ms, genq.Model{Name: n, Kind: genq.KindChat, Queue: genq.QueueToken(genq.KindChat, n), SizeBytes: 100})
	}
	return ms
}

func newTestFleet(t *testing.T, budget int64, rec *fleetLoads, reg prometheus.Registerer) *Fleet {
	t.Helper()
	f, err := NewFleet(fleetModels("a", "b", "c"), FleetOptions{Budget: budget, KeepAlive: time.Hour, Load: rec.load,
		Log: slog.New(slog.DiscardHandler), Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs one job on model name and says which model answered.
func run(t *testing.T, f *Fleet, name string, keep *float64) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	job := genq.Job{}
	job.KeepAlive = keep
	res, err := f.Backend(genq.QueueToken(genq.KindChat, name), genq.BackendInfo{}).Generate(ctx, job, nil)
	if err != nil {
		t.Fatalf("job for %s: %v", name, err)
	}
	return string(res.Data)
}

// Three models, a budget for two: each job is answered by its model, and
// the least recently used idle model makes room.
func TestFleetEvictsLeastRecentlyUsed(t *testing.T) {
	rec := &fleetLoads{}
	reg := prometheus.NewRegistry()
	f := newTestFleet(t, 200, rec, reg)
	for _, name := range []string{"a", "b", "a", "c", "b", "a"} {
		if got := run(t, f, name, nil); got != name {
			t.Fatalf("a job for %s was answered by %s", name, got)
		}
	}
	// a, b loaded; c evicts b (a was used since); b evicts a; a evicts c.
	loads, closes := rec.events()
	if loads != "a,b,c,b,a" || closes != "b,a,c" {
		t.Errorf("loads %s, closes %s; want a,b,c,b,a and b,a,c", loads, closes)
	}
	if got := strings.Join(f.Loaded(), ","); got != "a,b" {
		t.Errorf("loaded %s, want a,b", got)
	}
	if n := counterOf(t, reg, "genq_worker_model_evictions_total", "b"); n != 1 {
		t.Errorf("evictions of b: %v, want 1", n)
	}
	if n := counterOf(t, reg, "genq_worker_model_loads_total", "a"); n != 2 {
		t.Errorf("loads of a: %v, want 2", n)
	}
}

// A model with a job in flight is never evicted: a job for another model
// waits for room, and later jobs wait behind it.
func TestFleetNeverEvictsInFlight(t *testing.T) {
	rec := &fleetLoads{}
	f := newTestFleet(t, 100, rec, nil)
	_, releaseA, err := f.acquire(context.Background(), genq.QueueToken(genq.KindChat, "a"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { got <- run(t, f, "b", nil) }()
	select {
	case g := <-got:
		t.Fatalf("a job for b ran (%s) while a, holding the whole budget, had a job in flight", g)
	case <-time.After(100 * time.Millisecond):
	}
	if loads, closes := rec.events(); loads != "a" || closes != "" {
		t.Fatalf("loads %s, closes %s while a is in use", loads, closes)
	}
	releaseA(nil)
	if g := <-got; g != "b" {
		t.Fatalf("answered by %s, want b", g)
	}
	if loads, closes := rec.events(); loads != "a,b" || closes != "a" {
		t.Errorf("loads %s, closes %s; want a,b and a", loads, closes)
	}
}

func TestFleetKeepAlive(t *testing.T) {
	rec := &fleetLoads{}
	f := newTestFleet(t, 300, rec, nil)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	zero, forever, ten := 0.0, float64(genq.KeepForever), 10.0
	run(t, f, "a", &zero) // unloaded after its answer
	run(t, f, "b", &forever)
	run(t, f, "c", &ten)
	if got := strings.Join(f.Loaded(), ","); got != "b,c" {
		t.Fatalf("loaded %s right after; want b,c (a's keep_alive was 0)", got)
	}
	now = now.Add(11 * time.Second)
	f.expire()
	if got := strings.Join(f.Loaded(), ","); got != "b" {
		t.Errorf("loaded %s after 11 s; want b (c kept 10 s, b for ever)", got)
	}
}

// A model that fails to load fails its jobs with the reason, at once for
// a while, then tries again.
func TestFleetLoadFailure(t *testing.T) {
	rec := &fleetLoads{fail: map[string]error{"a": errors.New("not a GGUF file")}}
	f := newTestFleet(t, 300, rec, nil)
	now := time.Unix(1000, 0)
	f.now = func() time.Time { return now }
	b := f.Backend(genq.QueueToken(genq.KindChat, "a"), genq.BackendInfo{})
	for range 2 {
		_, err := b.Generate(context.Background(), genq.Job{}, nil)
		if genq.ErrorCode(err) != genq.Unavailable || !strings.Contains(genq.ErrorMessage(err), "the model a could not be loaded: not a GGUF file") {
			t.Fatalf("job on a model that fails to load: %v", err)
		}
	}
	if loads, _ := rec.events(); loads != "a" {
		t.Errorf("loads %s; want one try within the retry pause", loads)
	}
	now = now.Add(time.Minute)
	_, _ = b.Generate(context.Background(), genq.Job{}, nil)
	if loads, _ := rec.events(); loads != "a,a" {
		t.Errorf("loads %s; want a second try after the pause", loads)
	}
	if got := run(t, f, "b", nil); got != "b" {
		t.Errorf("another model answered %s", got)
	}
}

// A model over the budget is refused, not dropped: the fleet keeps it,
// says why, and fails a job that reaches it at once with the budget
// named, without loading anything; a budget below every model leaves the
// fleet up (no crash loop) with every model refused.
func TestFleetBudgetTooSmall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  int64
		models  []genq.Model
		refused []string
	}{
		{"below every model", 99, fleetModels("a", "b"), []string{"a", "b"}},
		{"below one model", 150, append(fleetModels("a"), genq.Model{Name: "big", Kind: genq.KindChat, Queue: genq.QueueToken(genq.KindChat, "big"), SizeBytes: 1000}), []string{"big"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fleetLoads{}
			f, err := NewFleet(tc.models, FleetOptions{Budget: tc.budget, Load: rec.load, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("NewFleet: %v; want the fleet up, its models refused", err)
			}
			if n := len(f.Models()); n != len(tc.models) {
				t.Errorf("%d models kept, want %d", n, len(tc.models))
			}
			for _, m := range tc.models {
				q := m.Queue
				refused := f.Refusal(q)
				if want := slices.Contains(tc.refused, m.Name); (refused != nil) != want {
					t.Errorf("%s: refusal %v; want refused %v", m.Name, refused, want)
				}
				if refused == nil {
					continue
				}
				_, err := f.Backend(q, genq.BackendInfo{}).Generate(context.Background(), genq.Job{}, nil)
				msg := genq.ErrorMessage(err)
				if genq.ErrorCode(err) != genq.Unavailable || !strings.Contains(msg, fmt.Sprintf("MODEL_MEMORY_BUDGET of %d bytes", tc.budget)) || !strings.Contains(msg, "the model "+m.Name) {
					t.Errorf("a job for %s: %v; want unavailable, naming the model and the budget", m.Name, err)
				}
			}
			if loads, _ := rec.events(); loads != "" {
				t.Errorf("loads %q; want none of a refused model", loads)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "8GiB": 8 << 30, "512MB": 512e6, "1.5 KiB": 1536} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseBytes("lots"); err == nil {
		t.Error("ParseBytes(lots) took it")
	}
}

// counterOf reads the counter name of model from reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name, model string) float64 {
	t.Helper()
	v, _ := promtest.Value(t, reg, name, "model", model)
	return v
}
