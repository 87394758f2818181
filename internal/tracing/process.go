package tracing

import (
	"context"
	"log/slog"
	"time"
)

// shutdownWithin bounds the flush of a stopping process's last spans: a
// collector that is away must not hold the process up.
const shutdownWithin = 5 * time.Second

// Start is Setup for a process: its returned stop flushes the spans still
// buffered, within a bound, and logs what could not be sent.
func Start(ctx context.Context, c Config, log *slog.Logger) (Tracing, func(), error) {
	t, err := Setup(ctx, c, log)
	if err != nil {
		return Tracing{}, nil, err
	}
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWithin)
		defer cancel()
		if err := t.Shutdown(sctx); err != nil {
			log.Warn("could not send the last spans", "err", err)
		}
	}
	return t, stop, nil
}
