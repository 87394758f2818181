package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

// A Fleet is the models one worker serves within a memory budget
// (docs/text.md, "Many models"). Each model has its own Runtime, pulling
// its own queue, whose backend (Fleet.Backend) borrows the loaded model
// for each job: a job for a model that is not loaded loads it, evicting
// the least recently used idle models until it fits; a model with a job
// in flight is never evicted. Jobs wait in one line, first come first
// served: once a job waits for room, later jobs wait behind it even if
// their model is loaded, so that a busy model cannot starve another.
type Fleet struct {
	budget    int64
	keepAlive time.Duration
	load      Loader
	log       *slog.Logger
	now       func() time.Time
	metrics   *fleetMetrics
	// retryLoadAfter is how long a model that failed to load fails its
	// jobs at once before the next job tries to load it again.
	retryLoadAfter time.Duration

	mu      sync.Mutex
	models  map[genq.Variant]*fleetModel
	waiting []*fleetWaiter
	closed  bool
}

// Loader loads a model's backend. progress, called with 0 to 1, says how
// far the load is.
type Loader func(ctx context.Context, m genq.Model, progress func(float64)) (genq.Backend, error)

type fleetModel struct {
	model    genq.Model
	cost     int64
	state    genq.ModelState
	progress float64
	backend  genq.Backend
	info     genq.BackendInfo // of the last load
	refs     int              // jobs running on it
	lastUsed time.Time
	// keepUntil is when an idle model unloads; zero with keepForever.
	keepUntil   time.Time
	keepForever bool
	failed      error
	failedAt    time.Time
	// refused says why this worker can never load the model (alone, it
	// is over the budget): its queue is announced, never pulled.
	refused error
}

type fleetWaiter struct {
	m     *fleetModel
	ready chan error // nil error: a reference is held
}

// FleetOptions build a Fleet.
type FleetOptions struct {
	// Budget is the memory the loaded models may take together, in bytes.
	Budget int64
	// KeepAlive is how long an idle model stays loaded by default;
	// negative keeps it until evicted.
	KeepAlive time.Duration
	// RetryLoadAfter is how long a failed load is remembered (default 30 s).
	RetryLoadAfter time.Duration
	Load           Loader
	Log            *slog.Logger
	Registry       prometheus.Registerer
}

// NewFleet builds the fleet of models. The cost of a model is its files'
// size (Model.SizeBytes). A model whose cost alone is over the budget
// could never load: it is refused (Refusal), not dropped, so that the
// worker announces why and the api refuses its requests at once, and a
// budget below every model leaves the worker up, saying so, rather than
// exiting into a crash loop.
func NewFleet(models []genq.Model, o FleetOptions) (*Fleet, error) {
	if o.Budget <= 0 {
		return nil, errors.New("MODEL_MEMORY_BUDGET must be above 0")
	}
	f := &Fleet{budget: o.Budget, keepAlive: o.KeepAlive, load: o.Load, log: o.Log, now: time.Now,
		retryLoadAfter: o.RetryLoadAfter, models: map[genq.Variant]*fleetModel{}, metrics: newFleetMetrics(o.Registry)}
	if f.retryLoadAfter <= 0 {
		f.retryLoadAfter = 30 * time.Second
	}
	fits := 0
	for _, m := range models {
		fm := &fleetModel{model: m, cost: m.SizeBytes, state: genq.ModelUnloaded}
		if m.SizeBytes > o.Budget {
			fm.state, fm.refused = genq.ModelUnloadable, tooLarge(m, o.Budget)
			f.log.Error("model refused: it is larger than the memory budget", "model", m.Name, "bytes", m.SizeBytes, "budget", o.Budget)
		} else {
			fits++
		}
		f.models[m.Queue] = fm
		f.metrics.loaded.WithLabelValues(m.Name).Set(0)
	}
	if fits == 0 {
		f.log.Error("MODEL_MEMORY_BUDGET is smaller than every model this worker serves: it loads none, and announces why until it is raised or smaller models are served",
			"budget", o.Budget, "models", len(models))
	}
	return f, nil
}

// tooLarge is what a model over the budget is refused with, naming the
// setting to change: not the request's fault, and another worker, with
// a larger budget, may serve it.
func tooLarge(m genq.Model, budget int64) error {
	return genq.Errorf(genq.Unavailable, "the model %s needs %d bytes (its file and the KV cache of its slots), over this worker's MODEL_MEMORY_BUDGET of %d bytes: raise the budget, or serve a smaller model",
		m.Name, m.SizeBytes, budget)
}

// Refusal is why the fleet can never load q's model, nil when it can.
func (f *Fleet) Refusal(q genq.Variant) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fm, ok := f.models[q]; ok {
		return fm.refused
	}
	return nil
}

// Models lists the models the fleet serves, in no order.
func (f *Fleet) Models() []genq.Model {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]genq.Model, 0, len(f.models))
	for _, fm := range f.models {
		out = append(out, fm.model)
	}
	return out
}

// acquire waits until q's model is loaded and holds a reference to it for
// one job; release gives it back with the job's keep_alive.
func (f *Fleet) acquire(ctx context.Context, q genq.Variant) (genq.Backend, func(keepAlive *float64), error) {
	f.mu.Lock()
	fm, ok := f.models[q]
	if !ok || f.closed {
		f.mu.Unlock()
		return nil, nil, genq.Errorf(genq.Unavailable, "this worker does not serve the model of queue %s", q)
	}
	w := &fleetWaiter{m: fm, ready: make(chan error, 1)}
	f.waiting = append(f.waiting, w)
	f.scheduleLocked()
	f.mu.Unlock()

	select {
	case err := <-w.ready:
		if err != nil {
			return nil, nil, err
		}
	case <-ctx.Done():
		f.mu.Lock()
		if i := slices.Index(f.waiting, w); i >= 0 {
			f.waiting = slices.Delete(f.waiting, i, i+1)
			f.scheduleLocked() // it may have blocked the line
			f.mu.Unlock()
			return nil, nil, ctx.Err()
		}
		f.mu.Unlock()
		if err := <-w.ready; err == nil {
			f.release(fm, nil) // granted as the wait ended
		}
		return nil, nil, ctx.Err()
	}
	return fm.backend, func(keepAlive *float64) { f.release(fm, keepAlive) }, nil
}

// scheduleLocked grants the waiting jobs in order: a loaded model's at
// once, a failed one's its error, an unloaded one's a load when room can
// be made. The first job that cannot get room stops the line.
func (f *Fleet) scheduleLocked() {
	now := f.now()
	for i := 0; i < len(f.waiting); {
		w := f.waiting[i]
		fm := w.m
		switch {
		case fm.refused != nil:
			w.ready <- fm.refused
			f.waiting = slices.Delete(f.waiting, i, i+1)
		case fm.state == genq.ModelLoaded:
			fm.refs++
			fm.lastUsed = now
			w.ready <- nil
			f.waiting = slices.Delete(f.waiting, i, i+1)
		case fm.state == genq.ModelLoading:
			i++
		case fm.failed != nil && now.Sub(fm.failedAt) < f.retryLoadAfter:
			w.ready <- fm.failed
			f.waiting = slices.Delete(f.waiting, i, i+1)
		case f.makeRoomLocked(fm):
			fm.state, fm.progress, fm.failed = genq.ModelLoading, 0, nil
			go f.loadModel(fm)
			i++
		default:
			return
		}
	}
}

// usedLocked is what the loaded and loading models cost.
func (f *Fleet) usedLocked() int64 {
	var used int64
	for _, fm := range f.models {
		if fm.state == genq.ModelLoaded || fm.state == genq.ModelLoading {
			used += fm.cost
		}
	}
	return used
}

// makeRoomLocked evicts idle models, least recently used first, until
// fm fits; false when it cannot fit yet (models in use or loading hold
// the room).
func (f *Fleet) makeRoomLocked(fm *fleetModel) bool {
	for f.usedLocked()+fm.cost > f.budget {
		var victim *fleetModel
		for _, c := range f.models {
			if c.state == genq.ModelLoaded && c.refs == 0 && (victim == nil || c.lastUsed.Before(victim.lastUsed)) {
				victim = c
			}
		}
		if victim == nil {
			return false
		}
		f.log.Info("evicting a model to load another", "model", victim.model.Name, "for", fm.model.Name,
			"idle", f.now().Sub(victim.lastUsed).Round(time.Millisecond).String())
		f.metrics.evictions.WithLabelValues(victim.model.Name).Inc()
		f.unloadLocked(victim)
	}
	return true
}

// unloadLocked frees an idle model's backend.
func (f *Fleet) unloadLocked(fm *fleetModel) {
	if err := fm.backend.Close(); err != nil {
		f.log.Warn("closing a model failed", "model", fm.model.Name, "err", err)
	}
	fm.backend, fm.state, fm.progress = nil, genq.ModelUnloaded, 0
	f.metrics.loaded.WithLabelValues(fm.model.Name).Set(0)
}

// loadModel loads fm (marked loading) and grants its waiting jobs, or
// fails them with the reason.
func (f *Fleet) loadModel(fm *fleetModel) {
	start := f.now()
	f.log.Info("loading a model", "model", fm.model.Name, "path", fm.model.Path)
	b, err := f.load(context.Background(), fm.model, func(p float64) {
		f.mu.Lock()
		fm.progress = p
		f.mu.Unlock()
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil && f.closed {
		_ = b.Close()
		err = errors.New("the worker is stopping")
	}
	if err != nil {
		fm.state, fm.failed, fm.failedAt = genq.ModelUnloaded, loadError(fm.model, err), f.now()
		f.metrics.loadFailures.WithLabelValues(fm.model.Name).Inc()
		f.log.Error("model failed to load; its jobs fail until a later job tries again", "model", fm.model.Name,
			"err", err, "retry_after", f.retryLoadAfter.String())
	} else {
		fm.state, fm.backend, fm.info, fm.progress = genq.ModelLoaded, b, b.Info(), 1
		fm.lastUsed = f.now()
		f.setKeepLocked(fm, nil)
		took := f.now().Sub(start)
		f.metrics.loads.WithLabelValues(fm.model.Name).Inc()
		f.metrics.loadSeconds.WithLabelValues(fm.model.Name).Observe(took.Seconds())
		f.metrics.loaded.WithLabelValues(fm.model.Name).Set(1)
		f.log.Info("model loaded", "model", fm.model.Name, "took", took.Round(time.Millisecond).String(), "used", f.usedLocked(), "budget", f.budget)
	}
	f.scheduleLocked()
}

// loadError is what the jobs of a model that failed to load are told: not
// the request's fault, and retried (another worker may load the model)
// until the job's attempts are spent.
func loadError(m genq.Model, err error) error {
	return genq.WrapError(genq.Unavailable, err, fmt.Sprintf("the model %s could not be loaded: %v", m.Name, err))
}

// release ends one job's use of fm, keeping it loaded as keepAlive (the
// job's keep_alive, in seconds) or the default says.
func (f *Fleet) release(fm *fleetModel, keepAlive *float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fm.refs--
	fm.lastUsed = f.now()
	f.setKeepLocked(fm, keepAlive)
	if f.expiredLocked(fm, fm.lastUsed) {
		f.log.Info("unloading a model: its keep-alive is over", "model", fm.model.Name)
		f.unloadLocked(fm)
	}
	f.scheduleLocked()
}

func (f *Fleet) setKeepLocked(fm *fleetModel, keepAlive *float64) {
	keep := f.keepAlive
	if keepAlive != nil {
		keep = time.Duration(*keepAlive * float64(time.Second))
	}
	fm.keepForever = keep < 0
	fm.keepUntil = f.now().Add(max(keep, 0))
}

func (f *Fleet) hasWaiterLocked(fm *fleetModel) bool {
	return slices.ContainsFunc(f.waiting, func(w *fleetWaiter) bool { return w.m == fm })
}

// expiredLocked reports whether fm is loaded, idle, with no job waiting
// for it, and past its keep-alive at now: then it unloads.
func (f *Fleet) expiredLocked(fm *fleetModel, now time.Time) bool {
	return fm.state == genq.ModelLoaded && fm.refs == 0 && !fm.keepForever && !now.Before(fm.keepUntil) && !f.hasWaiterLocked(fm)
}

// Run unloads models whose keep-alive is over until ctx ends, then
// unloads every model.
func (f *Fleet) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.close()
			return
		case <-t.C:
			f.expire()
		}
	}
}

// expire unloads the idle models whose keep-alive is over.
func (f *Fleet) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	for _, fm := range f.models {
		if f.expiredLocked(fm, now) {
			f.log.Info("unloading an idle model: its keep-alive is over", "model", fm.model.Name,
				"idle", now.Sub(fm.lastUsed).Round(time.Second).String())
			f.unloadLocked(fm)
		}
	}
}

func (f *Fleet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, fm := range f.models {
		if fm.state == genq.ModelLoaded && fm.refs == 0 {
			f.unloadLocked(fm)
		}
	}
}

// state is what q's heartbeat says of its model.
func (f *Fleet) state(q genq.Variant) (genq.ModelState, float64, genq.BackendInfo) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fm := f.models[q]
	return fm.state, fm.progress, fm.info
}

// Loaded lists the names of the loaded models, sorted.
func (f *Fleet) Loaded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for _, fm := range f.models {
		if fm.state == genq.ModelLoaded {
			names = append(names, fm.model.Name)
		}
	}
	slices.Sort(names)
	return names
}

// Backend is the backend q's Runtime runs: it borrows the model from the
// fleet for each job. info is what the Runtime announces before the model
// has ever loaded (its slots, its name, the device).
func (f *Fleet) Backend(q genq.Variant, info genq.BackendInfo) genq.Backend {
	return &fleetBackend{fleet: f, queue: q, info: info}
}

type fleetBackend struct {
	fleet *Fleet
	queue genq.Variant
	info  genq.BackendInfo
}

func (b *fleetBackend) Info() genq.BackendInfo { return b.info }

func (b *fleetBackend) Generate(ctx context.Context, job genq.Job, progress func(genq.Progress)) (genq.Result, error) {
	backend, release, err := b.fleet.acquire(ctx, b.queue)
	if err != nil {
		return genq.Result{}, err
	}
	defer release(job.KeepAlive)
	return backend.Generate(ctx, job, progress)
}

// GenerateStream streams when the loaded backend can, and answers whole
// otherwise.
func (b *fleetBackend) GenerateStream(ctx context.Context, job genq.Job, progress func(genq.Progress), emit func(genq.TextPiece)) (genq.Result, error) {
	backend, release, err := b.fleet.acquire(ctx, b.queue)
	if err != nil {
		return genq.Result{}, err
	}
	defer release(job.KeepAlive)
	if s, ok := backend.(genq.TextStreamer); ok {
		return s.GenerateStream(ctx, job, progress, emit)
	}
	return backend.Generate(ctx, job, progress)
}

// PrefixCacheStats are the loaded model's, zero while it is not loaded:
// routing by prefix works per model as it does for a worker of one.
func (b *fleetBackend) PrefixCacheStats() genq.PrefixCacheStats {
	b.fleet.mu.Lock()
	defer b.fleet.mu.Unlock()
	if c, ok := b.fleet.models[b.queue].backend.(genq.PrefixCacheReporter); ok {
		return c.PrefixCacheStats()
	}
	return genq.PrefixCacheStats{}
}

// Close does nothing: the fleet owns the models (Fleet.Run unloads them).
func (b *fleetBackend) Close() error { return nil }

// ModelState is what the heartbeat says of the model: its state, how far
// its load is, and the limits of its last load.
func (b *fleetBackend) ModelState() (genq.ModelState, float64, *genq.Limits) {
	state, progress, info := b.fleet.state(b.queue)
	if info.Limits == (genq.Limits{}) {
		return state, progress, nil
	}
	return state, progress, &info.Limits
}

// Device is what the model's last load ran on; zero before any.
func (b *fleetBackend) Device() genq.Device {
	_, _, info := b.fleet.state(b.queue)
	return info.Device
}

// modelStater is a backend whose model loads and unloads (fleetBackend).
type modelStater interface {
	ModelState() (genq.ModelState, float64, *genq.Limits)
	Device() genq.Device
}

// fleetMetrics are the fleet's Prometheus series, by model.
type fleetMetrics struct {
	loads, evictions, loadFailures *prometheus.CounterVec
	loaded                         *prometheus.GaugeVec
	loadSeconds                    *prometheus.HistogramVec
}

func newFleetMetrics(reg prometheus.Registerer) *fleetMetrics {
	m := &fleetMetrics{
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_worker_model_loads_total", Help: "Models this worker loaded, by model.",
		}, []string{"model"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_worker_model_evictions_total", Help: "Idle models this worker unloaded to make room for another, by model.",
		}, []string{"model"}),
		loadFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_worker_model_load_failures_total", Help: "Loads that failed, by model.",
		}, []string{"model"}),
		loaded: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "genq_worker_model_loaded", Help: "1 for each model loaded now, 0 for each this worker serves unloaded.",
		}, []string{"model"}),
		loadSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "genq_worker_model_load_seconds", Help: "Time to load a model.", Buckets: minuteBuckets,
		}, []string{"model"}),
	}
	if reg != nil {
		reg.MustRegister(m.loads, m.evictions, m.loadFailures, m.loaded, m.loadSeconds)
	}
	return m
}
