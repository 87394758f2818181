package diffusion

import (
	"context"
	"errors"
	"fmt"
	"image"
	"log/slog"
	"time"

	"github.com/genq/genq/internal/genq"
)

// Generate runs one image job as every engine does: the prompt checked
// (the worker only runs validated jobs, but benchmarks and tests call an
// engine directly), the job's parameters resolved against s, and gen's
// pixels returned as the result in the job's format (PNG unless it asks
// for JPEG). A failure after the context ended names the
// context's end as its cause.
func Generate(ctx context.Context, job genq.Job, s Settings, log *slog.Logger,
	gen func(ctx context.Context, text string, p Params) (*image.NRGBA, error)) (genq.Result, error) {
	if err := genq.ValidateText(job.Text); err != nil {
		return genq.Result{}, err
	}
	p, err := Resolve(job, s)
	if err != nil {
		return genq.Result{}, err
	}
	start := time.Now()
	img, err := gen(ctx, job.Text, p)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return genq.Result{}, err
	}
	quality := 0
	if job.OutputCompression != nil {
		quality = *job.OutputCompression
	}
	data, contentType, err := Encode(img, job.OutputFormat, quality)
	if err != nil {
		return genq.Result{}, err
	}
	log.Debug("image generated", "job", job.ID, "seed", p.Seed, "size", fmt.Sprintf("%dx%d", p.Width, p.Height),
		"steps", p.Steps, "format", contentType, "bytes", len(data), "took", time.Since(start).Round(time.Millisecond))
	return genq.Result{ContentType: contentType, Data: data}, nil
}
