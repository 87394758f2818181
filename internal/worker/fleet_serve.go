package worker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// Serve runs a Runtime per model of the fleet, each pulling its model's
// queue with cfg's settings and announcing info(model) until its model
// first loads, until ctx ends; then, every runtime drained, it unloads
// the models. Each runtime's metrics carry its model's name. A refused
// model (Refusal) gets heartbeats only.
func (f *Fleet) Serve(ctx context.Context, conn *natsqueue.Conn, cfg Config, info func(genq.Model) genq.BackendInfo, log *slog.Logger, reg prometheus.Registerer) error {
	fleetCtx, stopFleet := context.WithCancel(context.WithoutCancel(ctx))
	fleetDone := make(chan struct{})
	go func() { defer close(fleetDone); f.Run(fleetCtx) }()
	models := f.Models()
	errs := make([]error, len(models))
	var wg sync.WaitGroup
	for i, m := range models {
		rcfg := cfg
		rcfg.Variant = m.Queue
		mlog := log.With("model", m.Name, "queue", string(m.Queue))
		if refused := f.Refusal(m.Queue); refused != nil {
			wg.Go(func() { errs[i] = announceRefused(ctx, conn, rcfg, info(m), refused, mlog) })
			continue
		}
		rt := New(rcfg, conn, f.Backend(m.Queue, info(m)), mlog, prometheus.WrapRegistererWith(prometheus.Labels{"model": m.Name}, reg))
		wg.Go(func() { errs[i] = rt.Run(ctx) })
	}
	wg.Wait()
	stopFleet()
	<-fleetDone
	return errors.Join(errs...)
}

// announceRefused beats for a model the worker can never load, until ctx
// ends, without pulling its queue: the api then refuses its requests at
// once with the reason (docs/protocol.md §6) while no other worker can
// load it, and a job already queued waits for one that can.
func announceRefused(ctx context.Context, conn *natsqueue.Conn, cfg Config, info genq.BackendInfo, refused error, log *slog.Logger) error {
	log.Error("refusing a model this worker can never load", "reason", genq.ErrorMessage(refused))
	started := time.Now()
	beatEvery(ctx, cmp.Or(cfg.HeartbeatEvery, 3*time.Second), func(ctx context.Context) {
		sendBeat(ctx, conn, genq.Heartbeat{WorkerID: cfg.WorkerID, Variant: cfg.Variant, Device: info.Device, Model: info.Model,
			ModelState: genq.ModelUnloadable, LoadError: genq.ErrorMessage(refused), StartedAt: started, At: time.Now()}, log)
	})
	withdrawBeat(ctx, conn, cfg.Variant, cfg.WorkerID, log)
	return nil
}
