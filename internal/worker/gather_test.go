package worker

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
)

// TestGatherMoreDrainSettles: when a worker drains while its turn hands
// the jobs waiting behind one to idle slots, the jobs no slot took go back
// to the queue, each settled once with the puller (a slot the headroom
// counted is freed) and each arrived once at the gathering, so the job
// that pulled them still runs.
func TestGatherMoreDrainSettles(t *testing.T) {
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	st := natsqueue.DefaultSettings()
	st.AckWait = 2 * time.Second
	st.Memory = true
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	conn, err := natsqueue.Dial(t.Context(), natsqueue.ConnectOptions{URL: ns.ClientURL()}, st, log, genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	const jobs = 4 // one pulled, three behind it
	for range jobs {
		job := genq.Job{Envelope: genq.Envelope{ID: uuid.NewString(), Variant: genq.VariantB, Text: "hi", Deadline: time.Now().Add(time.Minute)}}
		if _, err := conn.Publish(t.Context(), job); err != nil {
			t.Fatal(err)
		}
	}
	puller, err := conn.NewPuller(t.Context(), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	d, err := puller.Next(5 * time.Second)
	if err != nil || d == nil {
		t.Fatalf("pull: %v, %v", d, err)
	}

	r := &Runtime{log: log, lanes: &lanes{}, gather: newGather(jobs, jobs)}
	r.gather.idle = jobs - 1 // the other slots wait for a job
	draining, cancel := context.WithCancel(t.Context())
	cancel()
	jobCtx, arrive := r.gatherMore(draining, t.Context(), puller, d)
	arrive()

	if held := puller.Held(); held != 1 {
		t.Errorf("puller holds %d slots after the drain; want 1, the pulled job's", held)
	}
	g := genq.Arrive(jobCtx)
	if g == nil {
		t.Fatal("the pulled job is in no gathering; want one with the jobs behind it")
	}
	select {
	case <-g.Ready():
	default:
		t.Error("the gathering is not ready: a job handed back never arrived")
	}
	puller.Settled(d)
	if held := puller.Held(); held != 0 {
		t.Errorf("puller holds %d slots once every job settled; want 0", held)
	}
}
