package natsqueue

import (
	"testing"
	"time"
)

// The set-ups the package's tests share.

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
