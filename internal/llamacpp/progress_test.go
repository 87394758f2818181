package llamacpp

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tinygguf"
)

// progressLog records what one load's Progress was told.
type progressLog struct {
	mu    sync.Mutex
	seen  []float64
	limit int // stop the load at this call (0: never)
}

func (p *progressLog) report(f float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, f)
	return p.limit == 0 || len(p.seen) < p.limit
}

// A load reports llama.cpp's own progress to its Progress, rising to 1:
// several loads at once each to their own (one C callback serves them
// all, by its user-data word), and a Progress that returns false stops
// its load with an error, the model freed.
func TestOpenModelProgress(t *testing.T) {
	lib := loadEngine(t)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := tinygguf.Write(path, tinygguf.OptionsFor(genq.VariantB, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	logs := []*progressLog{{}, {}, {}, {limit: 2}}
	errs := make([]error, len(logs))
	var wg sync.WaitGroup
	for i, pl := range logs {
		wg.Go(func() {
			m, err := lib.OpenModel(path, ModelParams{Progress: pl.report})
			if err == nil {
				m.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, pl := range logs[:3] {
		if errs[i] != nil {
			t.Fatalf("load %d: %v", i, errs[i])
		}
		if len(pl.seen) < 2 || pl.seen[len(pl.seen)-1] != 1 {
			t.Errorf("load %d was told %v; want several fractions ending at 1", i, pl.seen)
		}
		for j := 1; j < len(pl.seen); j++ {
			if pl.seen[j] < pl.seen[j-1] || pl.seen[j] < 0 || pl.seen[j] > 1 {
				t.Errorf("load %d was told %v: not rising within [0, 1]", i, pl.seen)
				break
			}
		}
	}
	t.Logf("the first load was told %v", logs[0].seen)
	stopped := logs[3]
	if errs[3] != errLoadStopped || len(stopped.seen) != stopped.limit {
		t.Errorf("a load stopped at its 2nd report: %v after %d reports; want errLoadStopped after 2", errs[3], len(stopped.seen))
	}
}
