package natsqueue

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsembed"
)

// lockedBuffer is a log sink the connection's goroutines may write to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A worker told NATS_REPLY_PREFIXES publishes a job's result only to a
// reply_to under them; any other reply_to gets nothing, the result is
// stored, and the warning names the job, not the subject.
func TestDeliverPublishesOnlyToAllowedReplySubjects(t *testing.T) {
	t.Parallel()
	ns, err := natsembed.Start(natsembed.Options{Port: -1, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	logs := &lockedBuffer{}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	w, err := Dial(ctx, ConnectOptions{URL: ns.ClientURL(), ReplyPrefixes: "_INBOX_api,_INBOX_batch"},
		DefaultSettings(), slog.New(slog.NewTextHandler(logs, nil)), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	// The listener is another client, as a producer would be.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	tests := []struct {
		name    string
		replyTo string
		data    []byte
		want    bool // a reply arrives
	}{
		{"allowed, small", "_INBOX_api.p1.r", []byte(`{"generated_text":"a"}`), true},
		{"allowed, large", "_INBOX_batch.p1.r", bytes.Repeat([]byte("x"), w.inlineLimit()+1), true},
		{"another client's inbox, small", "_INBOX.victim.r", []byte(`{"generated_text":"b"}`), false},
		{"look-alike prefix, large", "_INBOX_apix.r", bytes.Repeat([]byte("y"), w.inlineLimit()+1), false},
		{"a job subject", "genq.jobs.B", []byte(`{"generated_text":"c"}`), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub, err := nc.SubscribeSync(tt.replyTo)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			job := testJob()
			job.ReplyTo = tt.replyTo
			h := nats.Header{}
			h.Set(HeaderStatus, StatusOK)
			if err := w.deliver(ctx, job, tt.data, h, false); err != nil {
				t.Fatalf("deliver: %v", err)
			}
			_, err = sub.NextMsg(300 * time.Millisecond)
			if got := err == nil; got != tt.want {
				t.Errorf("a reply arrived at %s: %v, want %v", tt.replyTo, got, tt.want)
			}
			a, err := w.FetchResult(ctx, job.ID)
			if err != nil {
				t.Fatalf("the result is not stored: %v", err)
			}
			body, _ := io.ReadAll(a.Body)
			a.Body.Close()
			if !bytes.Equal(body, tt.data) {
				t.Errorf("stored %d bytes, want %d", len(body), len(tt.data))
			}
			warned := strings.Contains(logs.String(), "job_id="+job.ID)
			if warned == tt.want {
				t.Errorf("warning for job %s logged: %v, want %v", job.ID, warned, !tt.want)
			}
			if strings.Contains(logs.String(), tt.replyTo) {
				t.Errorf("the log names the reply subject %s: %s", tt.replyTo, logs.String())
			}
		})
	}
}

func TestReplyAllowed(t *testing.T) {
	c := &Conn{replyPrefixes: splitPrefixes("_INBOX_api, _INBOX_batch.")}
	for subject, want := range map[string]bool{
		"_INBOX_api.abc.123":   true,
		"_INBOX_batch.x.y":     true,
		"_INBOX_apix.y":        false,
		"_INBOX.abc":           false,
		"genq.jobs.B":          false,
		"_INBOX_api.>":         false,
		"$JS.API.STREAM.PURGE": false,
	} {
		if got := c.ReplyAllowed(subject); got != want {
			t.Errorf("ReplyAllowed(%q) = %v, want %v", subject, got, want)
		}
	}
	if !(&Conn{}).ReplyAllowed("anything.at.all") {
		t.Error("with no prefixes every subject is allowed")
	}
}
