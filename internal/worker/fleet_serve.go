package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// Serve runs a Runtime per model of the fleet, each pulling its model's
// queue with cfg's settings and announcing info(model) until its model
// first loads, until ctx ends; then, every runtime drained, it unloads
// the models. Each runtime's metrics carry its model's name.
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
		rt := New(rcfg, conn, f.Backend(m.Queue, info(m)), mlog, prometheus.WrapRegistererWith(prometheus.Labels{"model": m.Name}, reg))
		wg.Go(func() { errs[i] = rt.Run(ctx) })
	}
	wg.Wait()
	stopFleet()
	<-fleetDone
	return errors.Join(errs...)
}
