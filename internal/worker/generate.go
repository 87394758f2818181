package worker

import (
	"context"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// generate runs d's job on backend: streaming its text, or its image's
// previews, as chunks when the job asks for it and the backend can, whole
// otherwise. The final
// result goes the usual way in both cases, so stored results and producers
// that do not stream see no difference.
func generate(ctx context.Context, backend genq.Backend, d *natsqueue.Delivery, progress func(genq.Progress)) (genq.Result, error) {
	if d.Tenant != "" {
		// A backend that runs many jobs at once shares its steps by tenant.
		ctx = genq.WithShare(ctx, genq.Share{Tenant: d.Tenant, Weight: d.Weight})
	}
	chunks := d.Chunks()
	if chunks == nil {
		return backend.Generate(ctx, d.Job, progress)
	}
	// Closed before the result is replied: a chunk the backend sends late
	// (while it notices a cancel, say) must not follow the reply.
	defer chunks.Close()
	switch b := backend.(type) {
	case genq.TextStreamer:
		return b.GenerateStream(ctx, d.Job, progress, chunks.Send)
	case genq.ImageStreamer:
		return b.GenerateImageStream(ctx, d.Job, progress, chunks.SendImage)
	}
	return backend.Generate(ctx, d.Job, progress)
}
