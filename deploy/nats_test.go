package deploy_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// startShippedNATS starts nats-server with deploy/nats/genq.conf, as compose
// runs it, on a free loopback port.
func startShippedNATS(t *testing.T) *server.Server {
	t.Helper()
	for _, role := range []string{"API", "WORKER", "BATCH"} {
		t.Setenv("GENQ_NATS_"+role+"_PASSWORD", "pw-"+strings.ToLower(role))
	}
	opts, err := server.ProcessConfigFile(filepath.Join(root, "deploy", "nats", "genq.conf"))
	if err != nil {
		t.Fatalf("the shipped NATS configuration does not parse: %v", err)
	}
	opts.Host, opts.Port, opts.HTTPPort, opts.StoreDir, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, 0, t.TempDir(), true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func TestShippedNATSRefusesAnonymousClients(t *testing.T) {
	ns := startShippedNATS(t)
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0))
	if err == nil {
		nc.Close()
		t.Fatal("an anonymous client was accepted")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("anonymous connect: %v, want an authorization error", err)
	}
}

// TestShippedNATSIsolatesProducers runs a job from the api's user through a
// worker's user while a batch producer listens on the api's inbox and on
// the jobs subjects, and tries to pull from the workers' consumer: it sees
// nothing of the job.
func TestShippedNATSIsolatesProducers(t *testing.T) {
	ns := startShippedNATS(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := natsqueue.DefaultSettings()
	dial := func(user, inbox string) *natsqueue.Conn {
		c, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: ns.ClientURL(), User: "genq-" + user,
			Password: "pw-" + user, InboxPrefix: inbox, ReplyPrefixes: "_INBOX_api,_INBOX_batch"}, s, log, genq.VariantB)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		t.Cleanup(c.Close)
		return c
	}
	api, worker, batch := dial("api", "_INBOX_api"), dial("worker", "_INBOX_worker"), dial("batch", "_INBOX_batch")

	var mu sync.Mutex
	var seen, denied []string
	batch.NATS().SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		mu.Lock()
		defer mu.Unlock()
		denied = append(denied, err.Error())
	})
	for _, subject := range []string{"_INBOX.>", "_INBOX_api.>", "genq.jobs.>", ">"} {
		if _, err := batch.NATS().Subscribe(subject, func(m *nats.Msg) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, m.Subject)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.NATS().Flush(); err != nil {
		t.Fatal(err)
	}

	client, err := natsqueue.NewClient(api)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		p, err := worker.NewPuller(ctx, genq.VariantB)
		if err != nil {
			t.Error(err)
			return
		}
		for ctx.Err() == nil {
			d, err := p.Next(time.Second)
			if err != nil || d == nil {
				continue
			}
			if !worker.ReplyAllowed(d.Job.ReplyTo) {
				t.Errorf("the api's reply subject %q is not allowed", d.Job.ReplyTo)
			}
			if err := d.Complete(ctx, genq.NewTextResult("secret answer"), natsqueue.ReplyMeta{Worker: "w"}); err != nil {
				t.Error(err)
			}
			return
		}
	}()
	job := genq.Job{ID: "job-1", Variant: genq.VariantB, Text: "secret prompt", Deadline: time.Now().Add(20 * time.Second)}
	answer, err := client.Run(ctx, job)
	if err != nil {
		t.Fatalf("the api's job did not run under the shipped users: %v", err)
	}
	body, _ := io.ReadAll(answer.Body)
	answer.Body.Close()
	if !strings.Contains(string(body), "secret answer") {
		t.Fatalf("answer %q", body)
	}

	// The batch role cannot pull the workers' jobs either.
	p, err := batch.NewPuller(ctx, genq.VariantB)
	if err == nil {
		if _, err := api.Publish(ctx, genq.Job{ID: "job-2", Variant: genq.VariantB, Text: "another secret"}); err != nil {
			t.Fatal(err)
		}
		if d, _ := p.Next(time.Second); d != nil {
			t.Fatalf("the batch role pulled a job: %+v", d)
		}
	}
	_ = batch.NATS().Flush()
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the batch role saw %v", seen)
	}
	if len(denied) == 0 {
		t.Fatal("no permission violation reported: the subscriptions were not refused")
	}
}
