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
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/genq/genq/internal/config/apiconfig"
	"github.com/genq/genq/internal/healthcheck"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsembed"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/shutdown"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/tracing"
)

func main() {
	ctx, stop := shutdown.OnSignal(context.Background())
	defer stop()
	if err := run(ctx, os.Args[1:], os.LookupEnv, os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout io.Writer) error {
	if len(args) == 1 && args[0] == "healthcheck" {
		port, _ := lookup("PORT")
		return healthcheck.Probe(ctx, "http://127.0.0.1:"+cmp.Or(port, "8080")+"/")
	}
	cfg, err := apiconfig.Parse(args, lookup, stdout)
	if err != nil {
		return err
	}
	log, err := logging.New(stdout, cfg.LogLevel, "api")
	if err != nil {
		return err
	}
	log = log.With("variant", string(cfg.HTTP.Variant))
	tr, stopTracing, err := tracing.Start(ctx, cfg.Tracing, log)
	if err != nil {
		return err
	}
	defer stopTracing()

	if cfg.NATS.URL == "" {
		ns, err := natsembed.Start(cfg.Embedded.Options())
		if err != nil {
			return err
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		cfg.NATS.URL = ns.ClientURL()
		log.Info("started embedded nats-server", "url", cfg.NATS.URL, "store", cfg.Embedded.StoreDir)
	}
	cfg.NATS.Name = "genq-api"
	// Every catalogue model's consumers exist from the start, so that an
	// autoscaler sees each model's lag from its first job.
	conn, err := natsqueue.Dial(ctx, cfg.NATS, cfg.Queue, log, cfg.HTTP.Catalog.Queues()...)
	if err != nil {
		return err
	}
	defer conn.Close()
	client, err := natsqueue.NewClient(conn)
	if err != nil {
		return err
	}
	defer client.Close()
	client.LookLate(cfg.ResultLooks)
	fleet, err := conn.WatchAllWorkers(ctx)
	if err != nil {
		return err
	}
	workers := fleet.Of(cfg.HTTP.Variant)
	// A conversation's turns go to the worker whose prefix cache holds
	// it, among the workers of its model whose heartbeats say they take
	// routed jobs (their ROUTE_BY_PREFIX); with fewer than two, to the
	// model's shared subject.
	client.RouteBy(natsqueue.NewRouter(fleet))

	// Keys from GENQ_KEYS join the settings' as the bucket changes; the
	// tenants' counters are shared by every api.
	keys := tenant.NewKeys(cfg.Keys)
	if err := conn.WatchKeys(ctx, keys, log); err != nil {
		return err
	}
	counters, err := conn.TenantStore(ctx)
	if err != nil {
		return err
	}
	limiter := tenant.NewLimiter(counters, newJobID())
	// The server removes a tenant's consumer left idle (TENANT_CONSUMER_IDLE);
	// this api makes it again for jobs that still wait on its subject.
	go conn.KeepTenantConsumers(ctx)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	store := natsqueue.NewJobStore(client)
	batches := store.NewBatchStore(natsqueue.FileStoreConfig{TTL: cfg.HTTP.Batches.FileTTL})
	handler := httpapi.NewServer(cfg.HTTP, httpapi.Deps{Jobs: store, Streamer: store, Async: store, Batches: batches, Background: ctx, Depths: conn, TenantQueues: conn,
		Workers: workers, Fleet: fleet, Waker: conn, Registry: reg, NewID: newJobID, Log: log, Keys: keys, Limiter: limiter, Tracing: tr.Provider})
	if cfg.MetricsAddr != "" {
		stopMetrics, err := serveMetrics(cfg.MetricsAddr, httpapi.NewMetricsHandler(reg, conn, log), log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := httpapi.NewHTTPServer(handler, cfg.HTTP)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("api listening", "addr", ln.Addr().String(), "api_keys", keys.Required(), "tenants", len(keys.Tenants()))

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down; waiting for requests in flight", "grace", cfg.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight at the end of the grace period: their jobs are cancelled and they are answered 503", "err", err)
	}
	fctx, cancelFlush := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelFlush()
	if err := limiter.Flush(fctx); err != nil {
		log.Warn("usage of tenants without limits lost: it could not be written before exiting", "err", err)
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
