// Package httpapi is genq's HTTP façade: the three routes of the interface contract (docs/api.md), OpenAI's
// /v1 routes (and, on an internal address, /metrics). It validates a request, hands the job to the queue, and
// waits for its result; it never runs a model itself. OpenAI's shapes are package openai's.
package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/structured"
	"github.com/genq/genq/internal/tenant"
)

// Jobs runs a job to its result.
type Jobs interface {
	Run(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error)
}

// Workers lists the live workers of the served variant.
type Workers interface {
	Live() []genq.Heartbeat
}

// Waker puts a wake-up signal on the variant's queue.
type Waker interface {
	PublishWakeup(ctx context.Context, v genq.Variant, now time.Time) error
}

// Config holds the façade's settings.
type Config struct {
	Variant genq.Variant
	// Catalog is the models the api serves (MODELS_FILE, MODELS); nil:
	// the variant's model alone, under any name.
	Catalog *genq.Catalog
	// MaxBodyBytes bounds a request body; more gives 413.
	MaxBodyBytes int64
	// MaxV1BodyBytes bounds the body of a POST on OpenAI's routes, whose
	// conversations, tools and schemas outgrow a seed request; zero takes
	// MaxBodyBytes.
	MaxV1BodyBytes int64
	// MaxPromptBytes bounds a prompt's text (a chat's content, a
	// completion's prompt, /generate's text); more gives 400. Zero bounds
	// it by the live workers' context instead (promptBytes).
	MaxPromptBytes int
	// QueueCapacity is the queue's bound on jobs (QUEUE_CAPACITY): a
	// request of more jobs is a 400, since it could never be queued.
	QueueCapacity int64
	// JobTimeout is how long a request waits for its answer, queueing
	// included, before it gets 504.
	JobTimeout time.Duration
	// WakeupEvery rate-limits wake-up signals while no worker is live.
	WakeupEvery time.Duration
	// APIKeys, when any are set, are required as bearer tokens on /generate
	// and every /v1 route.
	APIKeys []string
	// ReadHeaderTimeout and ReadTimeout cut off clients that send their
	// request too slowly, so they cannot hold connections open for free.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// Images bounds the image routes (variant C): MaxN the images of one
	// request. Size and steps are the live workers' (imageLimits); MaxSize
	// and MaxSteps, where set, bound them further (tests).
	Images ImageLimits
	// Async sets up POST /v1/jobs and its webhooks.
	Async AsyncConfig
	// Batches sizes the Files and Batch APIs.
	Batches BatchConfig
}

// HTTPServer is the façade's http.Server, with a shutdown that leaves no
// request waiting for nobody.
type HTTPServer struct {
	*http.Server
	abandon context.CancelCauseFunc // ends every request's context
}

// errShuttingDown is the cause with which requests still waiting at the end
// of the shutdown grace are abandoned; their callers get 503 and may retry
// on another replica.
var errShuttingDown = genq.Errorf(genq.Unavailable, "the api is shutting down; retry")

// NewHTTPServer wraps the façade in an http.Server with timeouts fit for it:
// reads are short, writes last as long as a job may.
func NewHTTPServer(h http.Handler, cfg Config) *HTTPServer {
	base, abandon := context.WithCancelCause(context.Background())
	return &HTTPServer{
		Server: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, 10*time.Second),
			ReadTimeout:       cmp.Or(cfg.ReadTimeout, 30*time.Second),
			WriteTimeout:      cfg.JobTimeout + 30*time.Second,
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			BaseContext:       func(net.Listener) context.Context { return base },
		},
		abandon: abandon,
	}
}

// abandonedAnswerTime bounds how long abandoned requests get to send their 503.
const abandonedAnswerTime = 5 * time.Second

// Shutdown stops accepting requests and lets those in flight finish until
// ctx ends. Those still waiting then are abandoned: their jobs are
// cancelled (a queued one never runs, a running one stops), and they are
// answered 503, so no model runs for a caller the api has dropped. It
// returns ctx's error when requests had to be abandoned.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	err := s.Server.Shutdown(ctx)
	if err == nil {
		return nil
	}
	s.abandon(errShuttingDown)
	actx, cancel := context.WithTimeout(context.Background(), abandonedAnswerTime)
	defer cancel()
	if s.Server.Shutdown(actx) != nil {
		_ = s.Server.Close()
	}
	return err
}

// Deps are the façade's dependencies. A nil Streamer or Async switches its
// feature off: stream: true is refused with a 400, /v1/jobs answers 503.
type Deps struct {
	Jobs     Jobs
	Streamer StreamJobs
	Async    AsyncJobs
	// Batches keeps the Files and Batch APIs' state; nil switches them off
	// (503). With Async, the server runs batches until Background ends.
	Batches    BatchStore
	Background context.Context
	// Depths tells the queue view each lane's depth; nil leaves it out.
	Depths Depths
	// TenantQueues tells the queue view each tenant's jobs waiting and
	// running; nil leaves them out.
	TenantQueues TenantQueues
	Workers      Workers
	// Fleet lists the live workers of every queue (every catalogue
	// model's); nil: Workers, the variant's alone.
	Fleet Workers
	Waker Waker
	// Registry takes the metrics; NewMetricsHandler serves them.
	Registry prometheus.Registerer
	// Keys are the API keys and their tenants; nil takes Config.APIKeys,
	// each a tenant of its own without limits.
	Keys *tenant.Keys
	// Limiter admits requests under their tenants' limits and keeps their
	// usage, in counters every api shares; nil enforces no limit and keeps
	// usage on /metrics only.
	Limiter *tenant.Limiter
	// NewID names each job.
	NewID func() string
	Log   *slog.Logger
	// Tracing makes the api's spans (tracing.Setup); nil: none.
	Tracing trace.TracerProvider
}

// Server holds the façade's settings and dependencies.
type Server struct {
	cfg      Config
	log      *slog.Logger
	jobs     Jobs
	streamer StreamJobs
	async    AsyncJobs
	batches  BatchStore
	depths   Depths
	queues   TenantQueues
	recent   recentJobs
	workers  Workers
	fleet    Workers
	catalog  *genq.Catalog
	waker    Waker
	metrics  *metrics
	keys     *tenant.Keys
	limiter  *tenant.Limiter
	newID    func() string
	tracer   trace.Tracer
	// constraints compiles the schemas and tools of requests, so that one
	// no worker could hold an answer to is refused before it is queued.
	constraints *structured.Cache

	wakeMu   sync.Mutex
	lastWake time.Time

	// sdChosen are the image models chosen by POST /sdapi/v1/options.
	sdChosen sdChoices

	// instance names this api in the batches it holds; batchKick wakes
	// its batch runner.
	instance  string
	batchKick chan struct{}
}

// NewServer returns the façade as an http.Handler.
func NewServer(cfg Config, deps Deps) http.Handler {
	s := &Server{cfg: cfg, log: deps.Log, jobs: deps.Jobs, streamer: deps.Streamer, async: deps.Async, batches: deps.Batches, depths: deps.Depths, queues: deps.TenantQueues,
		workers: deps.Workers, fleet: deps.Fleet, catalog: catalogOf(cfg),
		waker: deps.Waker, newID: deps.NewID, keys: keysOf(cfg, deps), limiter: deps.Limiter, constraints: structured.NewCache(constraintCacheSize),
		batchKick: make(chan struct{}, 1)}
	s.tracer = cmp.Or[trace.TracerProvider](deps.Tracing, noop.NewTracerProvider()).Tracer(tracerName)
	if s.fleet == nil {
		s.fleet = deps.Workers
	}
	s.metrics = newMetrics(deps.Registry, func() float64 { return float64(len(deps.Workers.Live())) })
	if s.batches != nil && s.async != nil {
		s.instance = deps.NewID()
		go s.batchRunner().Run(cmp.Or(deps.Background, context.Background()), s.batchKick)
	}
	if w, ok := s.async.(OutcomeWatcher); ok {
		go w.WatchOutcomes(cmp.Or(deps.Background, context.Background()), s.meterStored)
	}
	return s.routes()
}

// batchRunner is the runner of this api's batches, which asks the routes
// how to queue and answer each request.
func (s *Server) batchRunner() *batchrun.Runner {
	cfg := s.cfg.Batches.withDefaults()
	return &batchrun.Runner{Routes: batchLines{s}, Store: s.batches, Queue: s.async, Webhooks: s.cfg.Async.webhooks(),
		Config: batchrun.Config{Window: cfg.Window, LeaseFor: cfg.LeaseFor, ChecksPerRound: cfg.ChecksPerRound,
			PollEvery: s.cfg.Async.withDefaults().PollEvery},
		Instance: s.instance, Log: s.log}
}

// workerLimits are the tightest limits of the live workers' models, as
// their heartbeats tell them: a job that breaks them is refused before it
// is queued. With no live worker that tells them, they hold nothing back,
// and the worker that takes the job checks it.
func (s *Server) workerLimits() genq.Limits {
	var lims []genq.Limits
	for _, hb := range s.workers.Live() {
		if hb.Limits != nil {
			lims = append(lims, *hb.Limits)
		}
	}
	return genq.Tightest(lims...)
}

// constraintCacheSize is how many compiled schemas and tool sets the api
// keeps: a client's tools repeat with every request of a conversation.
const constraintCacheSize = 256

// checkConstraint refuses a job whose response_format or tools no answer
// could be held to: a schema keyword genq cannot enforce, a $ref to
// nowhere, a schema nothing satisfies.
func (s *Server) checkConstraint(job genq.Job) error {
	_, err := s.constraints.ForJob(job)
	return err
}

// fitsQueue refuses a request of more jobs than the queue holds, which
// could never be queued whole: a 429 would have clients retry it forever.
func (s *Server) fitsQueue(jobs int, what string) error {
	if c := s.cfg.QueueCapacity; c > 0 && int64(jobs) > c {
		return genq.Errorf(genq.Invalid, "this request asks for %d %s, and the queue holds at most %d jobs (QUEUE_CAPACITY): ask for fewer", jobs, what, c)
	}
	return nil
}

// limits are what one request may ask for.
func (s *Server) limits() openai.Limits {
	return openai.Limits{MaxPromptBytes: s.promptBytes(), Images: s.imageLimits()}
}

// promptBytes bounds a prompt's text, in bytes: MAX_PROMPT_BYTES when it
// is set; else the bound the longest context the live workers announce
// sets (genq.PromptBytes), or, with none announcing one (none started
// yet, scaling from zero, images), the longest context genq serves. The
// bound only spares a worker a prompt no context could hold: tokens are
// the worker's to count, and it refuses what its context cannot hold
// (genq.ContextExceeded). The longest context, not the tightest, sets it:
// a prompt between the two is the workers' to judge.
func (s *Server) promptBytes() int {
	if s.cfg.MaxPromptBytes > 0 {
		return s.cfg.MaxPromptBytes
	}
	longest := 0
	for _, hb := range s.fleet.Live() {
		if hb.Limits != nil {
			longest = max(longest, hb.Limits.ContextSize)
		}
	}
	if longest == 0 {
		longest = genq.MaxPromptTokenIDs
	}
	return genq.PromptBytes(longest)
}

// imageLimits bound one image request. Its size and steps are the live
// workers' own, IMAGE_MAX_SIZE and IMAGE_MAX_STEPS, which their heartbeats
// carry, so the api is never told them: with no live worker that tells
// them, the protocol's bounds hold, and the worker that takes the job
// checks it.
func (s *Server) imageLimits() ImageLimits {
	lim, w := s.cfg.Images, s.workerLimits()
	lim.MaxSize = tightest(genq.MaxImageSide, lim.MaxSize, w.ImageMaxSize)
	lim.MaxSteps = tightest(genq.MaxImageSteps, lim.MaxSteps, w.ImageMaxSteps)
	return lim
}

// tightest is the least of bound and the limits that are set.
func tightest(bound int, limits ...int) int {
	for _, l := range limits {
		if l > 0 {
			bound = min(bound, l)
		}
	}
	return bound
}
