package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/tenant"
)

type metrics struct {
	requests        *prometheus.CounterVec
	generateSeconds *prometheus.HistogramVec
	queueWait       prometheus.Histogram
	jobSeconds      prometheus.Histogram
	inFlight        prometheus.Gauge
	redeliveries    prometheus.Counter
	rejections      *prometheus.CounterVec
	wakeups         prometheus.Counter
	tenant          tenantMetrics
	rateLimited     *prometheus.CounterVec
}

// minuteBuckets reach from 5 ms to 10 minutes: a request may queue while a
// worker scales up from zero.
var minuteBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}

func newMetrics(reg prometheus.Registerer, liveWorkers func() float64) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_http_requests_total", Help: "HTTP requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		generateSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "genq_generate_seconds", Help: "Latency of POST /generate, by outcome.", Buckets: minuteBuckets,
		}, []string{"outcome"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "genq_queue_wait_seconds", Help: "Time jobs waited in the queue before a worker started them.", Buckets: minuteBuckets,
		}),
		jobSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "genq_job_duration_seconds", Help: "Time workers spent running jobs.", Buckets: minuteBuckets,
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "genq_jobs_in_flight", Help: "Jobs this api is waiting on.",
		}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "genq_redelivered_jobs_total", Help: "Jobs answered after more than one delivery.",
		}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_rejections_total", Help: "Requests refused before or at queueing, by reason.",
		}, []string{"reason"}),
		wakeups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "genq_wakeups_total", Help: "Wake-up signals queued while no worker was live.",
		}),
	}
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "genq_tenant_rate_limited_total", Help: "Requests refused 429 for a tenant's limit, by tenant and limit (rpm, tpm, tpd, images_per_day, concurrency).",
	}, []string{"tenant", "limit"})
	m.tenant = newTenantMetrics(reg)
	reg.MustRegister(m.rateLimited, m.requests, m.generateSeconds, m.queueWait, m.jobSeconds, m.inFlight, m.redeliveries, m.rejections, m.wakeups,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "genq_live_workers", Help: "Live workers of the served variant, from their heartbeats.",
		}, liveWorkers))
	return m
}

// tenantMetrics are the tenants' usage, by tenant, model and route: the
// tenants are the keys' (a bounded set), the models the workers', the
// routes the api's patterns, so no client can grow the labels.
type tenantMetrics struct {
	requests, prompt, cached, completion, images, engine *prometheus.CounterVec
}

func newTenantMetrics(reg prometheus.Registerer) tenantMetrics {
	labels := []string{"tenant", "model", "route"}
	vec := func(name, help string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	return tenantMetrics{
		requests:   vec("genq_tenant_requests_total", "Generation requests admitted, by tenant, model and route."),
		prompt:     vec("genq_tenant_prompt_tokens_total", "Prompt tokens of the tenants' answers, cached ones included."),
		cached:     vec("genq_tenant_cached_prompt_tokens_total", "Prompt tokens the workers reused from their cache."),
		completion: vec("genq_tenant_completion_tokens_total", "Answer tokens."),
		images:     vec("genq_tenant_images_total", "Images made."),
		engine:     vec("genq_tenant_engine_seconds_total", "Seconds the workers ran the tenants' jobs."),
	}
}

// countUsage adds a settled request's usage to its tenant's metrics.
func (m *metrics) countUsage(name string, u tenant.Usage) {
	l := []string{name, u.Model, u.Route}
	m.tenant.requests.WithLabelValues(l...).Add(float64(u.Requests))
	m.tenant.prompt.WithLabelValues(l...).Add(float64(u.PromptTokens))
	m.tenant.cached.WithLabelValues(l...).Add(float64(u.CachedTokens))
	m.tenant.completion.WithLabelValues(l...).Add(float64(u.CompletionTokens))
	m.tenant.images.WithLabelValues(l...).Add(float64(u.Images))
	m.tenant.engine.WithLabelValues(l...).Add(u.EngineSeconds)
}
