package worker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

// metrics are the worker's Prometheus series.
type metrics struct {
	jobs         *prometheus.CounterVec
	taken        *prometheus.CounterVec
	redeliveries prometheus.Counter
	inFlight     prometheus.Gauge
	slots        prometheus.Gauge
	duration     prometheus.Histogram
	queueWait    prometheus.Histogram
}

// minuteBuckets reach from 5 ms to 10 minutes: generation on a cold or busy
// worker takes minutes, and the tail is what matters.
var minuteBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_worker_jobs_total", Help: "Jobs handled by this worker, by outcome.",
		}, []string{"outcome"}),
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "genq_worker_jobs_taken_total",
			Help: "Jobs this worker pulled, by consumer: shared, own (routed to it) or stolen (routed to another worker that did not start them in time).",
		}, []string{"from"}),
		redeliveries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "genq_worker_redeliveries_total", Help: "Jobs received on a second or later delivery.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "genq_worker_jobs_in_flight", Help: "Jobs running now.",
		}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "genq_worker_slots", Help: "Jobs this worker runs at once.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "genq_worker_job_duration_seconds", Help: "Time the backend spent on a job.", Buckets: minuteBuckets,
		}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "genq_worker_queue_wait_seconds", Help: "Time from queueing to the start of the run.", Buckets: minuteBuckets,
		}),
	}
	reg.MustRegister(m.jobs, m.taken, m.redeliveries, m.inFlight, m.slots, m.duration, m.queueWait)
	return m
}

// watchPrefixCache exports a text backend's prefix cache: prompt tokens
// reused and computed, and the tokens it holds against its capacity, read
// from the backend at each scrape.
func watchPrefixCache(reg prometheus.Registerer, c genq.PrefixCacheReporter) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "genq_worker_prefix_cache_hit_tokens_total", Help: "Prompt tokens reused from the prefix cache (the shared system prefix included), not computed.",
		}, func() float64 { return float64(c.PrefixCacheStats().HitTokens) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "genq_worker_prefix_cache_miss_tokens_total", Help: "Prompt tokens computed because no cached prefix held them.",
		}, func() float64 { return float64(c.PrefixCacheStats().MissTokens) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "genq_worker_prefix_cache_tokens", Help: "Tokens whose KV cells the prefix cache holds for reuse.",
		}, func() float64 { return float64(c.PrefixCacheStats().HeldTokens) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "genq_worker_prefix_cache_capacity_tokens", Help: "Most tokens the prefix cache can hold: every slot's context.",
		}, func() float64 { return float64(c.PrefixCacheStats().CapacityTokens) }),
	)
}

// watchSchemaCache exports a text backend's structured-output caches:
// compiled grammars and token masks, the bytes each holds against its
// limit, and what each dropped to stay within it.
func watchSchemaCache(reg prometheus.Registerer, c genq.SchemaCacheReporter) {
	gauge := func(name, help string, f func(genq.SchemaCacheStats) int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(f(c.SchemaCacheStats())) })
	}
	counter := func(name, help string, f func(genq.SchemaCacheStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(f(c.SchemaCacheStats())) })
	}
	reg.MustRegister(
		gauge("genq_worker_schema_grammars", "Compiled grammars the schema cache holds.",
			func(s genq.SchemaCacheStats) int64 { return s.Grammars }),
		gauge("genq_worker_schema_grammar_bytes", "Bytes the schema cache's grammars hold, their masks aside.",
			func(s genq.SchemaCacheStats) int64 { return s.GrammarBytes }),
		gauge("genq_worker_schema_grammar_limit_bytes", "Most bytes the schema cache's grammars may hold (TEXT_SCHEMA_CACHE_MIB).",
			func(s genq.SchemaCacheStats) int64 { return s.GrammarLimit }),
		counter("genq_worker_schema_grammar_evictions_total", "Grammars dropped from the schema cache, least recently used first.",
			func(s genq.SchemaCacheStats) int64 { return s.GrammarEvictions }),
		gauge("genq_worker_schema_mask_tables", "Tables of token masks (a grammar's, or a shared string rule's) held.",
			func(s genq.SchemaCacheStats) int64 { return s.MaskTables }),
		gauge("genq_worker_schema_mask_bytes", "Bytes the token masks of grammars' nodes hold.",
			func(s genq.SchemaCacheStats) int64 { return s.MaskBytes }),
		gauge("genq_worker_schema_mask_limit_bytes", "Most bytes the token masks may hold (TEXT_SCHEMA_CACHE_MIB).",
			func(s genq.SchemaCacheStats) int64 { return s.MaskLimit }),
		counter("genq_worker_schema_mask_evictions_total", "Tables of token masks emptied, least recently used first; their masks are worked out again on use.",
			func(s genq.SchemaCacheStats) int64 { return s.MaskEvictions }),
	)
}
