package textgen

import (
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/genq/genq/internal/procfs"
)

// threadGovernor keeps the engine's compute threads to the CPUs other
// processes leave free. ggml's threads wait for each other at every
// operation's barrier, spinning; when another process takes one of two
// cores, a step's two threads meet only when the scheduler runs both, and
// decoding collapses to a third of what one thread alone does
// (docs/text.md measures it). So while other processes keep CPUs busy,
// steps compute on fewer threads, and on all of them again once they are
// free. It runs only when the threads were left to genq (TEXT_THREADS
// unset) and the model computes on the CPU.
type threadGovernor struct {
	most    int // the threads Open chose
	current int
	cpus    []int // the CPUs this process may run on
	last    procfs.CPUUse
	lastAt  time.Time
	// others is a moving average of the CPUs other processes kept busy.
	others float64
}

// governEvery is how often the governor looks at the CPUs: often enough to
// follow a benchmark or a build that starts beside the worker, seldom
// enough to cost nothing (one read of /proc/stat, about 50 µs).
const governEvery = 250 * time.Millisecond

// staleAfter: a reading older than this spans an idle spell of the loop.
const staleAfter = 4 * governEvery

func newThreadGovernor(most int) *threadGovernor {
	g := &threadGovernor{most: most, current: most}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		for c := range 1024 {
			if set.IsSet(c) {
				g.cpus = append(g.cpus, c)
			}
		}
	}
	return g
}

// threads is how many threads the next step should compute on, looking at
// the CPUs again when governEvery has passed.
func (g *threadGovernor) threads(now time.Time) int {
	if g == nil {
		return 0
	}
	if now.Sub(g.lastAt) < governEvery {
		return g.current
	}
	use, err := procfs.SampleCPU(os.Getpid(), g.cpus)
	if err != nil {
		return g.current
	}
	// A reading that spans a pause in stepping says what others did while
	// this worker was idle, not what they do now: it only starts the next
	// interval. Folded in, a benchmark of another server between two of
	// ours held the first second of our next run to one thread.
	if !g.lastAt.IsZero() && now.Sub(g.lastAt) <= staleAfter {
		g.others = (g.others + use.OthersBusy(g.last)) / 2
	}
	g.last, g.lastAt = use, now
	cpus := use.CPUs
	if cpus == 0 {
		cpus = runtime.NumCPU()
	}
	// A quarter of a CPU of others' work (the api answering, a log
	// shipper) costs less than a thread's share; more than that, and
	// the spinning costs more than the thread brings.
	free := int(float64(cpus) - g.others + 0.25)
	g.current = min(g.most, max(1, free))
	return g.current
}
