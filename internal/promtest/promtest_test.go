package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	jobs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "jobs_total"}, []string{"model", "from"})
	loaded := prometheus.NewGauge(prometheus.GaugeOpts{Name: "loaded"})
	reg.MustRegister(jobs, loaded)
	jobs.WithLabelValues("a", "own").Add(3)
	jobs.WithLabelValues("b", "own").Add(5)
	jobs.WithLabelValues("b", "stolen").Add(7)
	loaded.Set(2)
	for _, tc := range []struct {
		name   string
		metric string
		labels []string
		want   float64
		ok     bool
	}{
		{"a gauge", "loaded", nil, 2, true},
		{"a counter by one label", "jobs_total", []string{"model", "a"}, 3, true},
		{"a counter by two labels", "jobs_total", []string{"model", "b", "from", "stolen"}, 7, true},
		{"the first counter of a label", "jobs_total", []string{"from", "own"}, 3, true},
		{"no such label value", "jobs_total", []string{"model", "c"}, 0, false},
		{"no such metric", "absent", nil, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Value(t, reg, tc.metric, tc.labels...)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("Value = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
