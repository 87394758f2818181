package natsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// ConnectOptions say how to reach the NATS server. Credentials are never logged.
type ConnectOptions struct {
	URL       string
	Name      string // shown in the server's connection list
	User      string
	Password  string
	Token     string
	CredsFile string // a .creds file (JWT and nkey seed)
	TLSCA     string
	TLSCert   string
	TLSKey    string
	// InboxPrefix replaces "_INBOX" in this client's inboxes (replies to
	// its jobs, JetStream API answers). A locked-down server lets each
	// producer subscribe only under its own prefix (docs/protocol.md §9).
	InboxPrefix string
	// ReplyPrefixes, comma-separated, when set, are the only subject
	// prefixes a worker publishes a job's reply to; a job naming another
	// reply_to is run and its result stored, but nothing is sent there.
	ReplyPrefixes string
}

// Dial connects to NATS and opens genq's assets for the variants: the one
// start-up sequence of the api, the workers and genqctl. Close the Conn to
// close the connection.
func Dial(ctx context.Context, o ConnectOptions, s Settings, log *slog.Logger, variants ...genq.Variant) (*Conn, error) {
	nc, err := connect(o, s.AckWait, log)
	if err != nil {
		return nil, err
	}
	c, err := open(ctx, nc, s, log, variants...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.replyPrefixes = splitPrefixes(o.ReplyPrefixes)
	return c, nil
}

// Close closes the NATS connection.
func (c *Conn) Close() { c.nc.Close() }

// Liveness returns the ping interval and the pings a connection may leave
// unanswered, for a job's AckWait: a server that died or froze without
// closing the socket is given up within about half of AckWait, so that a
// worker's ack, or an api's publish, reaches another server of the
// cluster before the job is handed to another worker. The interval stays
// within [minPing, maxPing]; NATS's own default notices a frozen server
// only after minutes.
func Liveness(ackWait time.Duration) (interval time.Duration, maxOut int) {
	const outstanding = 3
	return min(max(ackWait/2/(outstanding+1), minPing), maxPing), outstanding
}

// The bounds of the ping interval: below minPing a slow link's round trip
// or a busy server's pause reads as a death; above maxPing a dead server
// is noticed too late.
const (
	minPing = 2 * time.Second
	maxPing = 20 * time.Second
)

// connect dials NATS. It keeps retrying the first connection and reconnects
// forever afterwards: a worker or api started before NATS, or across a NATS
// restart, recovers by itself. Every component connects with the same
// settings (docs/deploy.md, "When a NATS node fails").
func connect(o ConnectOptions, ackWait time.Duration, log *slog.Logger) (*nats.Conn, error) {
	ping, maxOut := Liveness(ackWait)
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.ReconnectBufSize(64 << 20),
		nats.PingInterval(ping),
		nats.MaxPingsOutstanding(maxOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // our own Close: no news
			}
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats async error", "subject", subject, "err", err)
		}),
	}
	if o.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(o.InboxPrefix))
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	}
	if o.Token != "" {
		opts = append(opts, nats.Token(o.Token))
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	if o.TLSCert != "" || o.TLSKey != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	return nc, nil
}

// Conn is a NATS connection with genq's assets bound.
type Conn struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	settings Settings
	results  jetstream.ObjectStore
	cancels  jetstream.KeyValue
	workers  jetstream.KeyValue
	// attempts is GENQ_ATTEMPTS, bound on first use (runrecord.go).
	attemptsMu sync.Mutex
	attempts   jetstream.KeyValue
	log        *slog.Logger
	limits     consumerLimits // the consumer's, over settings' (conn_consumerlimits.go)
	// replyPrefixes bound where replies go (conn_reply.go); none: anywhere.
	replyPrefixes []string
	// storeTry bounds one Put of a result (conn_reply.go); tests shorten it.
	storeTry time.Duration
	// tenants are the tenants' consumers made so far (conn_tenant.go).
	tenants tenantConsumers
	// roundTrip is the last tenant listing's round trip in nanoseconds,
	// what a no-wait fetch must wait for its answer (puller.go).
	roundTrip atomic.Int64
}

// open ensures the assets for the given variants exist with the settings,
// retrying until NATS answers or ctx ends, and binds them.
func open(ctx context.Context, nc *nats.Conn, s Settings, log *slog.Logger, variants ...genq.Variant) (*Conn, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	backoff := 200 * time.Millisecond
	for {
		err = ensure(ctx, js, s, variants)
		if err == nil {
			break
		}
		if s.validate() != nil {
			return nil, err
		}
		log.Warn("nats is not ready; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("nats not ready: %w", errors.Join(err, ctx.Err()))
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
	c := &Conn{nc: nc, js: js, settings: s, log: log, storeTry: storeTry}
	if c.results, err = js.ObjectStore(ctx, ResultsBucket); err != nil {
		return nil, fmt.Errorf("bind %s: %w", ResultsBucket, err)
	}
	if c.cancels, err = js.KeyValue(ctx, CancelBucket); err != nil {
		return nil, fmt.Errorf("bind %s: %w", CancelBucket, err)
	}
	if c.workers, err = js.KeyValue(ctx, WorkersBucket); err != nil {
		return nil, fmt.Errorf("bind %s: %w", WorkersBucket, err)
	}
	// A worker of several models reads its first queue's consumer: the
	// api makes every model's consumer with the same settings.
	if len(variants) > 0 {
		if err := c.readConsumerLimits(ctx, variants[0]); err != nil {
			return nil, err
		}
	}
	if s.Adopt {
		if err := c.readAssetSettings(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Settings returns the limits the assets were ensured with, or with Adopt
// those read back from them; AckWait and MaxAttempts are those the
// consumer of the Conn's first variant holds (see FollowConsumerLimits).
func (c *Conn) Settings() Settings { return c.limits.apply(c.settings) }

// NATS returns the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// Connected reports whether the connection is up right now.
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// inlineLimit is the largest result sent inside the reply message; larger
// ones go through the results store. Headroom is left for headers.
func (c *Conn) inlineLimit() int {
	return int(c.nc.MaxPayload()) - 16<<10
}

// Depths are the jobs of variant v in each lane's stream, queued or
// running (a work queue keeps a job until it is acknowledged), on the
// shared subject and the tenants'.
func (c *Conn) Depths(ctx context.Context, v genq.Variant) (interactive, batch uint64, err error) {
	count := func(class Class) (uint64, error) {
		st, err := c.js.Stream(ctx, class.Stream())
		if err != nil {
			return 0, err
		}
		// The shared subject's jobs, and every tenant's (fair share).
		var n uint64
		for _, filter := range []string{class.Subject(v), tenantSubjects(class, v)} {
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
			if err != nil {
				return 0, err
			}
			for _, k := range info.State.Subjects {
				n += k
			}
		}
		return n, nil
	}
	if interactive, err = count(Interactive); err != nil {
		return 0, 0, genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
	}
	if batch, err = count(Batch); err != nil {
		return 0, 0, genq.WrapError(genq.Unavailable, err, "the queue is unavailable")
	}
	return interactive, batch, nil
}
