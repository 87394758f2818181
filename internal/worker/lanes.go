package worker

import (
	"sync"
	"time"

	"github.com/genq/genq/internal/natsqueue"
)

// lanes keeps a worker's batch work to the room its interactive work
// leaves. While no interactive job runs, batch jobs may fill every slot
// but those kept for interactive jobs; while one runs, at most busyBatch
// batch jobs do. On a GPU the sequences of one step cost little more than
// one, but the host's cores are shared: on 2 CPU cores, three batch jobs
// beside an interactive one took its p50 from 1.9 to 3.2 ms (docs/benchmarks.md).
type lanes struct {
	busyBatch int

	mu          sync.Mutex
	interactive int // interactive jobs taken and not yet settled
	batch       int // batch jobs taken, and pulls that may take one
}

// recheckBatch is how long a slot denied the batch lane waits on the
// interactive one before it asks again: how soon batch work resumes once
// interactive work stops.
const recheckBatch = 100 * time.Millisecond

// reserveBatch reports whether a pull may take a batch job now, holding a
// place for it until release.
func (l *lanes) reserveBatch() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interactive > 0 && l.batch >= l.busyBatch {
		return false
	}
	l.batch++
	return true
}

// took counts a delivery a pull returned, its batch place kept (reserved
// is what reserveBatch said) only for a batch job; done undoes it once the
// job is settled.
func (l *lanes) took(d *natsqueue.Delivery, reserved bool) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	isBatch := d != nil && d.Class == natsqueue.Batch
	if reserved && !isBatch {
		l.batch--
	}
	switch {
	case isBatch:
		return func() { l.mu.Lock(); l.batch--; l.mu.Unlock() }
	case d != nil:
		l.interactive++
		return func() { l.mu.Lock(); l.interactive--; l.mu.Unlock() }
	}
	return func() {}
}
