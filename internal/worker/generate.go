package worker

import (
	"context"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// generate runs d's job on backend: streaming its text as chunks when
// the job asks for it and the backend can, whole otherwise. The final
// result goes the usual way in both cases, so stored results and producers
// that do not stream see no difference.
func generate(ctx context.Context, backend genq.Backend, d *natsqueue.Delivery, progress func(genq.Progress)) (genq.Result, error) {
	streamer, ok := backend.(genq.TextStreamer)
	chunks := d.Chunks()
	if !ok || chunks == nil {
		return backend.Generate(ctx, d.Job, progress)
	}
	// Closed before the result is replied: a chunk the backend sends late
	// (while it notices a cancel, say) must not follow the reply.
	defer chunks.Close()
	return streamer.GenerateStream(ctx, d.Job, progress, chunks.Send)
}
