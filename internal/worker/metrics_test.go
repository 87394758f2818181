package worker

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

type schemaCacheFake struct{ s genq.SchemaCacheStats }

func (f *schemaCacheFake) SchemaCacheStats() genq.SchemaCacheStats { return f.s }

// TestWatchSchemaCache checks that each figure of the backend's schema
// caches reaches its own metric, read at the scrape.
func TestWatchSchemaCache(t *testing.T) {
	fake := &schemaCacheFake{}
	reg := prometheus.NewRegistry()
	watchSchemaCache(reg, fake)
	fake.s = genq.SchemaCacheStats{Grammars: 3, GrammarBytes: 1000, GrammarLimit: 2000, GrammarEvictions: 4,
		MaskTables: 5, MaskBytes: 6000, MaskLimit: 7000, MaskEvictions: 8}
	want := map[string]float64{
		"genq_worker_schema_grammars":                3,
		"genq_worker_schema_grammar_bytes":           1000,
		"genq_worker_schema_grammar_limit_bytes":     2000,
		"genq_worker_schema_grammar_evictions_total": 4,
		"genq_worker_schema_mask_tables":             5,
		"genq_worker_schema_mask_bytes":              6000,
		"genq_worker_schema_mask_limit_bytes":        7000,
		"genq_worker_schema_mask_evictions_total":    8,
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		m := f.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			got[f.GetName()] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			got[f.GetName()] = m.GetCounter().GetValue()
		}
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d metrics, want %d: %v", len(got), len(want), got)
	}
}
