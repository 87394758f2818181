package worker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/envflag"
)

// FleetConfig tunes a worker that serves several models (fleet.go).
type FleetConfig struct {
	// Budget is MODEL_MEMORY_BUDGET as given: bytes, or with a unit
	// (8GiB, 512MB); empty derives it from the device (DefaultBudget).
	Budget string
	// KeepAlive is how long an idle model stays loaded unless its last
	// job said otherwise; negative keeps it.
	KeepAlive time.Duration
	// Serve names the catalogue's models this worker serves; empty: every
	// one it finds a file for.
	Serve []string
}

// DefaultKeepAlive is Ollama's default: users of several models expect it.
const DefaultKeepAlive = 5 * time.Minute

// RegisterFlags binds the settings of a worker of several models.
func (c *FleetConfig) RegisterFlags(fs *envflag.Set) {
	fs.String(&c.Budget, "model-memory-budget", "MODEL_MEMORY_BUDGET", "", "with several models: memory the loaded models may take together, in bytes or with a unit (8GiB, 512MB); empty: 80% of the GPU's memory, or of the RAM available at start on a CPU")
	fs.List(&c.Serve, "worker-models", "WORKER_MODELS", "with a catalogue: the names of the models this worker serves, comma-separated (empty: every model whose file it finds); a deployment per model scales each from its own queue")
	fs.Duration(&c.KeepAlive, "keep-alive", "KEEP_ALIVE", DefaultKeepAlive, "with several models: how long an idle model stays loaded unless its last request's keep_alive says otherwise (negative: until evicted)")
}

// ParseBytes reads a size: a number of bytes, or one with a unit of
// KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   float64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes, or a number with KB, MB, GB, KiB, MiB or GiB", s)
	}
	return int64(n * mult), nil
}
