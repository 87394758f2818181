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

// partialQuality is the JPEG quality of previews: whatever the final
// image's format, a preview is JPEG, small enough for one NATS message at
// any size genq makes (a 1024² PNG of a half-denoised image is not) and
// quick to encode.
const partialQuality = 85

// Generate runs one image job as every engine does: the prompt checked
// (the worker only runs validated jobs, but benchmarks and tests call an
// engine directly), the job's parameters resolved against s, and gen's
// pixels returned as the result in the job's format (PNG unless it asks
// for JPEG). gen hands each of p.Partials previews to partial, which
// emit gets as JPEG (emit nil: the job does not stream). A failure after the context ended names the
// context's end as its cause.
func Generate(ctx context.Context, job genq.Job, s Pipeline, log *slog.Logger, emit func(genq.ImagePiece),
	gen func(ctx context.Context, text string, p Params, partial func(int, *image.NRGBA)) (*image.NRGBA, error)) (genq.Result, error) {
	if err := genq.ValidateText(job.Text); err != nil {
		return genq.Result{}, err
	}
	p, err := Resolve(job, s)
	if err != nil {
		return genq.Result{}, err
	}
	start := time.Now()
	if emit == nil {
		p.Partials = 0
	}
	partial := func(index int, img *image.NRGBA) {
		data, contentType, err := Encode(img, genq.ImageJPEG, partialQuality)
		if err != nil {
			log.Warn("preview not encoded", "job", job.ID, "index", index, "err", err)
			return
		}
		emit(genq.ImagePiece{Index: index, ContentType: contentType, Data: data})
	}
	img, err := gen(ctx, job.Text, p, partial)
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
