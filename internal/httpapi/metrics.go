package httpapi

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	requests        *prometheus.CounterVec
	generateSeconds *prometheus.HistogramVec
	queueWait       prometheus.Histogram
	jobSeconds      prometheus.Histogram
	inFlight        prometheus.Gauge
	redeliveries    prometheus.Counter
	rejections      *prometheus.CounterVec
	wakeups         prometheus.Counter
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
	reg.MustRegister(m.requests, m.generateSeconds, m.queueWait, m.jobSeconds, m.inFlight, m.redeliveries, m.rejections, m.wakeups,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "genq_live_workers", Help: "Live workers of the served variant, from their heartbeats.",
		}, liveWorkers))
	return m
}
