package worker

import (
	"testing"

	"github.com/genq/genq/internal/natsqueue"
)

// TestLanes: batch pulls fill the slots while no interactive job runs, and
// are held to busyBatch while one does; a pull that brought an
// interactive job, or none, gives its batch place back.
func TestLanes(t *testing.T) {
	interactive := &natsqueue.Delivery{Class: natsqueue.Interactive}
	batch := &natsqueue.Delivery{Class: natsqueue.Batch}
	l := &lanes{busyBatch: 1}

	// Idle: three slots may each take a batch job.
	var batchDone []func()
	for i := range 3 {
		if !l.reserveBatch() {
			t.Fatalf("batch pull %d refused on an idle worker", i)
		}
		batchDone = append(batchDone, l.took(batch, true))
	}
	// An interactive job comes: no new batch pull while three run.
	endInteractive := l.took(interactive, false)
	if l.reserveBatch() {
		t.Fatal("a batch pull beside an interactive job and three batch jobs")
	}
	// Two batch jobs end: one still runs, the bound; none more.
	batchDone[0]()
	batchDone[1]()
	if l.reserveBatch() {
		t.Fatal("a second batch job beside an interactive one")
	}
	// The last ends: one may start beside the interactive job.
	batchDone[2]()
	if !l.reserveBatch() {
		t.Fatal("no batch job beside an interactive one, with none running")
	}
	// That pull brought an interactive job instead: its place is free again.
	endSecond := l.took(interactive, true)
	if !l.reserveBatch() {
		t.Fatal("the place of a pull that brought an interactive job was kept")
	}
	l.took(nil, true)() // and one that brought nothing
	endInteractive()
	endSecond()
	if l.interactive != 0 || l.batch != 0 {
		t.Fatalf("after every job ended: %d interactive, %d batch counted", l.interactive, l.batch)
	}
	// busyBatch 0: nothing starts beside interactive work.
	l = &lanes{}
	end := l.took(interactive, false)
	if l.reserveBatch() {
		t.Fatal("a batch pull beside interactive work with busyBatch 0")
	}
	end()
	if !l.reserveBatch() {
		t.Fatal("no batch pull on an idle worker with busyBatch 0")
	}
}
