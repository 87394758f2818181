package natsqueue

import (
	"context"
	"testing"
	"time"
)

// TestCallerGone: a worker that replied and died before its ack leaves a
// redelivery that asks the caller before it runs the job again: a caller
// that has its answer says it no longer waits; one still waiting, that it
// does; a job with no caller, or a caller gone with its process, runs.
func TestCallerGone(t *testing.T) {
	c, cl, p := newTestServer(t).clientAndPuller()

	// Answered: the reply reaches the caller, the ack never leaves.
	answered := testJob()
	got := make(chan error, 1)
	go func() {
		_, err := cl.Run(t.Context(), answered)
		got <- err
	}()
	d := pullJob(t, p, answered.ID)
	if d.CallerGone(t.Context()) {
		t.Fatal("a caller waiting for its answer said it no longer waits")
	}
	if err := c.deliver(t.Context(), d.Job, []byte("answer"), replyHeader(d), false); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the caller's answer: %v", err)
	}
	if !d.CallerGone(t.Context()) {
		t.Fatal("a caller that has its answer said it still waits")
	}

	// A job with no caller (stored, asynchronous) and one whose caller's
	// process is gone: nobody says no, so the job runs.
	stored := pullStored(t, c, p)
	if stored.CallerGone(t.Context()) {
		t.Fatal("a job with no caller was judged answered")
	}
	gone := d.Job
	gone.ReplyTo = "_INBOX.nobody." + gone.ID
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if (&Delivery{conn: c, Job: gone}).CallerGone(ctx) {
		t.Fatal("a caller nobody answers for was judged answered")
	}
}

// replyHeader is the header of a successful reply to d.
func replyHeader(d *Delivery) map[string][]string {
	return map[string][]string{HeaderJobID: {d.Job.ID}, HeaderStatus: {StatusOK}, HeaderContentType: {"text/plain"}, HeaderSize: {"6"}}
}

// pullStored queues a stored job, which has no caller, and pulls it.
func pullStored(t *testing.T, c *Conn, p *Puller) *Delivery {
	t.Helper()
	job := testJob()
	job.Store = true
	if _, err := c.Publish(t.Context(), job); err != nil {
		t.Fatal(err)
	}
	return pullJob(t, p, job.ID)
}
