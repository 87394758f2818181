package natsqueue

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
)

// TestReceiptSparesTheStore: a reply its producer confirms its caller took
// is not stored; a job that asked for store, a reply nobody took, and a
// producer that confirms nothing keep the rule that every result is
// stored. Each caller that waits gets its answer either way.
func TestReceiptSparesTheStore(t *testing.T) {
	s := newTestServer(t)
	c, cl, p := s.clientAndPuller()
	plain, err := nats.Connect(s.ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)

	tests := []struct {
		name       string
		store      bool
		callerGone bool // the caller gave up before the reply came
		noReceipt  bool // a producer that confirms nothing (Conn.Publish)
		wantStored bool
	}{
		{name: "caller takes it", wantStored: false},
		{name: "store asked", store: true, wantStored: true},
		{name: "caller gone", callerGone: true, wantStored: true},
		{name: "producer confirms nothing", noReceipt: true, wantStored: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := testJob()
			job.Store = tt.store
			answer := make(chan error, 1)
			runCtx, giveUp := context.WithCancel(t.Context())
			defer giveUp()
			if tt.noReceipt {
				job.ReplyTo = "_INBOX.plain." + job.ID
				sub, err := plain.SubscribeSync(job.ReplyTo)
				if err != nil {
					t.Fatal(err)
				}
				defer sub.Unsubscribe()
				if _, err := c.Publish(t.Context(), job); err != nil {
					t.Fatal(err)
				}
				go func() { _, err := sub.NextMsg(10 * time.Second); answer <- err }()
			} else {
				go func() {
					r, err := cl.Run(runCtx, job)
					if err == nil {
						_, err = io.ReadAll(r.Body)
						r.Body.Close()
					}
					answer <- err
				}()
			}
			d := pullJob(t, p, job.ID)
			if d.receipt == tt.noReceipt {
				t.Fatalf("the delivery's receipt is %v for a producer that confirms: %v", d.receipt, !tt.noReceipt)
			}
			if tt.callerGone {
				giveUp()
				if err := <-answer; genq.ErrorCode(err) != genq.Canceled {
					t.Fatalf("the caller that gave up got %v, want canceled", err)
				}
			}
			res := genq.Result{ContentType: "text/plain", Data: []byte("answer")}
			if err := d.Complete(t.Context(), res, ReplyMeta{Worker: "w1"}); err != nil {
				t.Fatalf("complete: %v", err)
			}
			if !tt.callerGone {
				if err := <-answer; err != nil {
					t.Fatalf("the caller's answer: %v", err)
				}
			}
			stored, err := c.FetchResult(t.Context(), job.ID)
			if err == nil {
				stored.Body.Close()
			} else if genq.ErrorCode(err) != genq.NotFound {
				t.Fatalf("fetch the stored result: %v", err)
			}
			if got := err == nil; got != tt.wantStored {
				t.Errorf("result stored: %v, want %v", got, tt.wantStored)
			}
		})
	}
}
