// Package promtest reads metrics back from a Prometheus registry, for the
// tests of the packages that export them.
package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value is the value of the first counter or gauge called name in g
// whose labels hold each pair of labels (a label's name, then its value);
// ok is false when g has none. A failed gather fails t.
func Value(t testing.TB, g prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if hasLabels(got, labels) {
				if c := m.GetCounter(); c != nil {
					return c.GetValue(), true
				}
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// hasLabels tells whether got holds each pair of pairs; a label a metric
// lacks reads as empty, as Prometheus reads it.
func hasLabels(got map[string]string, pairs []string) bool {
	for i := 0; i+1 < len(pairs); i += 2 {
		if got[pairs[i]] != pairs[i+1] {
			return false
		}
	}
	return true
}
