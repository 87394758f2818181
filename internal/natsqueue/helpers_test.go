package natsqueue

import (
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
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
