package natsqueue

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// The set-ups the package's tests share.

// clientAndPuller dials s once for a Client and a Puller of variant B,
// the producer and the worker of a test on one connection.
func (s *testServer) clientAndPuller() (*Conn, *Client, *Puller) {
	s.t.Helper()
	c := s.dial()
	cl, err := NewClient(c)
	if err != nil {
		s.t.Fatal(err)
	}
	p, err := c.NewPuller(s.t.Context(), genq.VariantB)
	if err != nil {
		s.t.Fatal(err)
	}
	return c, cl, p
}

// pullJob pulls deliveries until job id's comes.
func pullJob(t *testing.T, p *Puller, id string) *Delivery {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		d, err := p.Next(200 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if d != nil && d.Job.ID == id {
			return d
		}
	}
	t.Fatalf("job %s never came", id)
	return nil
}

// dialTenantStore dials url for the tenants' store; the connection
// closes with the test.
func dialTenantStore(ctx context.Context, t *testing.T, url string, st Settings) *TenantStore {
	t.Helper()
	c, err := Dial(ctx, ConnectOptions{URL: url}, st, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	store, err := c.TenantStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// firstSwap creates tenant a's counters of a day with message id "first",
// the write the resend tests send again; it is the record's subject and
// the write's acknowledgement.
func firstSwap(ctx context.Context, t *testing.T, store *TenantStore) (string, *jetstream.PubAck) {
	t.Helper()
	subject := "$KV." + TenantsBucket + "." + tenant.CounterKey("a", "2026-11-29")
	first, err := swapOnce(ctx, store.js, subject, []byte(`{"tokens":1}`), 0, "first")
	if err != nil {
		t.Fatal(err)
	}
	return subject, first
}

// newClient makes a client on c, closed when the test ends.
func newClient(t *testing.T, c *Conn) *Client {
	t.Helper()
	cl, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// runOutcome is what Run gave its caller: the result's body read whole,
// or the error.
type runOutcome struct {
	body []byte
	err  error
}

// runAsync runs job on cl in a goroutine of its own and delivers what the
// caller got.
func runAsync(ctx context.Context, cl *Client, job genq.Job) <-chan runOutcome {
	got := make(chan runOutcome, 1)
	go func() {
		r, err := cl.Run(ctx, job)
		if err != nil {
			got <- runOutcome{nil, err}
			return
		}
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		got <- runOutcome{b, err}
	}()
	return got
}
