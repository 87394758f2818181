// Command api is genq's HTTP façade. It validates requests, queues jobs on
// NATS JetStream and waits for the workers' answers. With no NATS_URL it
// starts an embedded nats-server, so one machine needs nothing else.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/healthcheck"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

type config struct {
	variant       string
	addr          string
	port          int
	metricsAddr   string
	logLevel      string
	nats          natsqueue.ConnectOptions
	queue         natsqueue.Settings
	embeddedPort  int
	embeddedStore string
	embeddedMax   int
	embeddedMon   int
	http          httpapi.Config
	apiKeys       string
	apiKeysFile   string
	webhookAllow  string
	shutdownGrace time.Duration
	routeByPrefix bool
}

func parseConfig(args []string, lookup func(string) (string, bool), out io.Writer) (config, error) {
	var c config
	fs := envflag.NewLookup("api", lookup, out)
	fs.String(&c.variant, "variant", "VARIANT", "B", "variant served: A, B (text) or C (images)")
	fs.String(&c.addr, "addr", "ADDR", "", "listen address; overrides --port")
	fs.Int(&c.port, "port", "PORT", 8080, "HTTP port (80 in the container)")
	fs.StringOff(&c.metricsAddr, "metrics-addr", "METRICS_ADDR", ":9090", "internal address of /metrics, apart from the clients' port (empty: off)")
	fs.String(&c.logLevel, "log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	c.nats.RegisterFlags(fs, "")
	c.queue.RegisterFlags(fs)
	fs.Int(&c.embeddedPort, "embedded-nats-port", "EMBEDDED_NATS_PORT", 4222, "port of the embedded nats-server, used when NATS_URL is empty")
	fs.String(&c.embeddedStore, "embedded-nats-store", "EMBEDDED_NATS_STORE", ".genq/nats", "JetStream storage directory of the embedded nats-server")
	fs.Int(&c.embeddedMax, "embedded-nats-max-payload", "EMBEDDED_NATS_MAX_PAYLOAD", 0, "max_payload of the embedded nats-server in bytes (0: the default 1 MB)")
	fs.Int(&c.embeddedMon, "embedded-nats-monitor-port", "EMBEDDED_NATS_MONITOR_PORT", 0, "monitoring port of the embedded nats-server (0: off)")
	fs.Int64(&c.http.MaxBodyBytes, "max-body-bytes", "MAX_BODY_BYTES", 1<<20, "largest request body; more gets 413")
	fs.Int64(&c.http.MaxV1BodyBytes, "max-v1-body-bytes", "MAX_V1_BODY_BYTES", 8<<20, "largest request body on the /v1 routes (conversations, tools, schemas); more gets 413")
	fs.Int(&c.http.MaxPromptBytes, "max-prompt-bytes", "MAX_PROMPT_BYTES", 64<<10, "longest text in bytes; more gets 400")
	fs.Duration(&c.http.JobTimeout, "generate-timeout", "GENERATE_TIMEOUT", 5*time.Minute, "how long POST /generate waits, queueing included, before 504")
	fs.Duration(&c.http.WakeupEvery, "wakeup-interval", "WAKEUP_INTERVAL", 10*time.Second, "least time between two wake-up signals")
	fs.Secret(&c.apiKeys, "api-keys", "API_KEYS", "comma-separated bearer tokens required on POST /generate and the /v1 routes (none: open)")
	fs.String(&c.apiKeysFile, "api-keys-file", "API_KEYS_FILE", "", "file of bearer tokens, one per line")
	fs.Duration(&c.http.ReadHeaderTimeout, "read-header-timeout", "READ_HEADER_TIMEOUT", 10*time.Second, "time a client has to send its request headers (slow clients are cut off)")
	fs.Int(&c.http.Images.MaxSize, "image-max-size", "IMAGE_MAX_SIZE", httpapi.DefaultImageMaxSize, "variant C: largest width or height a request may ask for (give the workers the same)")
	fs.Int(&c.http.Images.MaxSteps, "image-max-steps", "IMAGE_MAX_STEPS", httpapi.DefaultImageMaxSteps, "variant C: most num_inference_steps a request may ask for (give the workers the same)")
	fs.Int(&c.http.Images.MaxN, "image-max-n", "IMAGE_MAX_N", httpapi.DefaultImageMaxN, "variant C: most images per POST /v1/images/generations")
	fs.Duration(&c.http.Async.JobTimeout, "async-job-timeout", "ASYNC_JOB_TIMEOUT", httpapi.DefaultAsyncJobTimeout, "deadline of a job queued by POST /v1/jobs, queueing included")
	fs.Secret(&c.http.Async.WebhookSecret, "webhook-secret", "WEBHOOK_SECRET", "HMAC-SHA256 key of the Genq-Signature header of webhooks (none: webhooks are refused)")
	fs.String(&c.webhookAllow, "webhook-allow", "WEBHOOK_ALLOW", "", "comma-separated hosts webhooks may go to (none: webhooks are refused)")
	fs.Bool(&c.http.Async.WebhookAllowPrivate, "webhook-allow-private", "WEBHOOK_ALLOW_PRIVATE", false, "let webhooks reach loopback, private and link-local addresses (tests, closed networks)")
	fs.Int(&c.http.Async.WebhookAttempts, "webhook-attempts", "WEBHOOK_ATTEMPTS", httpapi.DefaultWebhookAttempts, "deliveries of one webhook at most, 1 s apart and doubling")
	fs.Duration(&c.http.ReadTimeout, "read-timeout", "READ_TIMEOUT", 30*time.Second, "time a client has to send its whole request")
	fs.Int64(&c.http.Batches.MaxFileBytes, "max-file-bytes", "MAX_FILE_BYTES", httpapi.DefaultMaxFileBytes, "largest file POST /v1/files takes (a batch's input); more gets 413")
	fs.Duration(&c.http.Batches.FileTTL, "file-ttl", "FILE_TTL", httpapi.DefaultFileTTL, "how long files and batches are kept in JetStream")
	fs.Duration(&c.shutdownGrace, "shutdown-grace", "SHUTDOWN_GRACE", 60*time.Second, "how long requests in flight may finish after SIGTERM")
	natsqueue.RegisterRouteFlag(fs, &c.routeByPrefix)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	v, err := genq.ParseVariant(c.variant)
	if err != nil {
		return c, err
	}
	c.http.Variant = v
	c.http.QueueCapacity = c.queue.QueueCapacity
	if c.addr == "" {
		c.addr = ":" + strconv.Itoa(c.port)
	}
	keys, err := loadAPIKeys(c.apiKeys, c.apiKeysFile)
	if err != nil {
		return c, err
	}
	c.http.APIKeys = keys
	for _, h := range strings.Split(c.webhookAllow, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.http.Async.WebhookAllow = append(c.http.Async.WebhookAllow, h)
		}
	}
	return c, nil
}

func loadAPIKeys(list, file string) ([]string, error) {
	raw := strings.ReplaceAll(list, ",", "\n")
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read API keys file: %w", err)
		}
		raw += "\n" + string(b)
	}
	var keys []string
	for _, k := range strings.Split(raw, "\n") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	getenv := func(k string) string { v, _ := lookup(k); return v }
	if len(args) == 1 && args[0] == "healthcheck" {
		return healthcheck.Probe(ctx, "http://127.0.0.1:"+cmp.Or(getenv("PORT"), "8080")+"/")
	}
	cfg, err := parseConfig(args, lookup, stdout)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, cfg.logLevel, "api")
	if err != nil {
		return err
	}
	log = log.With("variant", string(cfg.http.Variant))

	if cfg.nats.URL == "" {
		ns, err := natsembed.Start(natsembed.Options{
			Port: cfg.embeddedPort, StoreDir: cfg.embeddedStore, MaxPayload: int32(cfg.embeddedMax), HTTPPort: cfg.embeddedMon,
		})
		if err != nil {
			return err
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		cfg.nats.URL = ns.ClientURL()
		log.Info("started embedded nats-server", "url", cfg.nats.URL, "store", cfg.embeddedStore)
	}
	cfg.nats.Name = "genq-api"
	conn, err := natsqueue.Dial(ctx, cfg.nats, cfg.queue, log, cfg.http.Variant)
	if err != nil {
		return err
	}
	defer conn.Close()
	client, err := natsqueue.NewClient(conn)
	if err != nil {
		return err
	}
	defer client.Close()
	workers, err := conn.WatchWorkers(ctx, cfg.http.Variant)
	if err != nil {
		return err
	}
	if cfg.routeByPrefix {
		client.RouteBy(natsqueue.NewRouter(workers))
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := natsqueue.NewJobStore(client)
	batches := store.NewBatchStore(natsqueue.FileStoreConfig{TTL: cfg.http.Batches.FileTTL})
	handler := httpapi.NewServer(cfg.http, httpapi.Deps{Jobs: store, Streamer: store, Async: store, Batches: batches, Background: ctx, Depths: conn,
		Workers: workers, Waker: conn, Registry: reg, NewID: newJobID, Log: log})
	if cfg.metricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.metricsAddr, httpapi.NewMetricsHandler(reg), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}

	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := httpapi.NewHTTPServer(handler, cfg.http)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("api listening", "addr", ln.Addr().String(), "api_keys", len(cfg.http.APIKeys) > 0)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; waiting for requests in flight", "grace", cfg.shutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight at the end of the grace period: their jobs are cancelled and they are answered 503", "err", err)
	}
	return nil
}

// serveMetrics serves h on addr, the internal address scrapers use.
func serveMetrics(addr string, h http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics listen on %s: %w (set METRICS_ADDR to a free address, or empty to turn /metrics off)", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// newJobID returns a time-ordered UUID (v7), so ids sort by submission.
func newJobID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
