package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig of a JPEG
	_ "image/png"  // and of a PNG
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// POST /v1/images/generations: OpenAI's image route for variant C. Each
// image is one job on the queue, so n images run on as many free worker
// slots.

// ImageLimits bound what one image request may ask for.
type ImageLimits = openai.ImageLimits

// imageRequest reads and checks an image request, or refuses it.
func (s *Server) imageRequest(w http.ResponseWriter, r *http.Request, start time.Time) (openai.ImageRequest, []genq.Job, genq.Model, bool) {
	var req openai.ImageRequest
	body, ok := s.v1RequestBody(w, r)
	if !ok {
		return req, nil, genq.Model{}, false
	}
	if err := s.requireKind(genq.KindImage, r.URL.Path, "; use /v1/chat/completions"); err != nil {
		s.rejectAs(w, err, writeV1Error)
		return req, nil, genq.Model{}, false
	}
	err := openai.Decode(body, &req)
	var model genq.Model
	if err == nil {
		model, err = s.resolveModel(req.Model, genq.KindImage)
	}
	var jobs []genq.Job
	if err == nil {
		tmpl := genq.Job{Envelope: genq.Envelope{ID: s.newID(), Variant: model.Queue, Deadline: start.Add(s.cfg.JobTimeout)}}
		jobs, err = openai.ImageJobs(req, s.imageLimits(), s.promptBytes(), tmpl, s.newID)
	}
	if err == nil {
		err = s.checkImages(jobs, "images (n)")
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return req, nil, genq.Model{}, false
	}
	return req, jobs, model, true
}

// DefaultImageMaxN is IMAGE_MAX_N's default.
const DefaultImageMaxN = openai.DefaultImageMaxN

func (s *Server) handleImageGenerations(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, span := s.startSpan(r.Context(), "decode request")
	req, jobs, model, ok := s.imageRequest(w, r, start)
	endDecode(span, jobs, ok, attribute.Bool("genq.stream", req.Stream))
	if !ok {
		return
	}
	if err := s.admit(w, r, admission{model: req.Model, resolved: model, cost: tenant.Cost{Images: int64(len(jobs))}, deadline: jobs[0].Deadline}); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	log := s.log.With("job_id", jobs[0].ID, "route", r.URL.Path, "n", len(jobs))
	w.Header().Set(HeaderJobID, jobs[0].ID)

	ctx, cancel := context.WithDeadline(r.Context(), jobs[0].Deadline)
	defer cancel()
	if req.Stream {
		s.streamImage(ctx, w, jobs[0], req.Format(), start, log)
		return
	}
	images, err := s.runImages(ctx, jobs, start, log)
	if err != nil {
		writeV1Error(w, log, err)
		return
	}
	data := make([]openai.ImageData, len(images))
	for i, b64 := range images {
		data[i] = openai.ImageData{B64JSON: b64}
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, openai.ImagesResponse{Created: start.Unix(), Data: data, OutputFormat: req.Format()})
	log.Info("generate done", "ms", time.Since(start).Milliseconds())
}

// checkImages is what both image routes check of a request's jobs before
// queuing them: the queue holds them, and the live workers make them (the
// images of a request differ only in their seeds).
func (s *Server) checkImages(jobs []genq.Job, what string) error {
	if err := s.fitsQueue(len(jobs), what); err != nil {
		return err
	}
	return s.workerLimitsOf(jobs[0].Variant).Check(jobs[0])
}

// runImages runs a request's image jobs at once and returns their images
// in base64, in order.
func (s *Server) runImages(ctx context.Context, jobs []genq.Job, start time.Time, log *slog.Logger) ([]string, error) {
	return runAll(ctx, jobs, func(ctx context.Context, i int, job genq.Job) (string, error) {
		return s.runImage(ctx, job, start, log.With("image", i, "image_job_id", job.ID))
	})
}

// imageSize reads an encoded image's width and height from its header
// (PNG or JPEG); ok is false when the header does not read.
func imageSize(r io.Reader) (width, height int, ok bool) {
	cfg, _, err := image.DecodeConfig(r)
	return cfg.Width, cfg.Height, err == nil
}

// runImage runs one image's job and returns its image in base64.
func (s *Server) runImage(ctx context.Context, job genq.Job, start time.Time, log *slog.Logger) (string, error) {
	res, err := s.runJob(ctx, job, start, log, s.jobs.Run)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	data, err := readImage(res)
	if err != nil {
		return "", fmt.Errorf("job %s: %w", job.ID, err)
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// streamImage answers a streamed image request with OpenAI's events: each
// preview as image_generation.partial_image, then the image as
// image_generation.completed. A failure before the first event is an
// ordinary error answer; after it, one error event ends the stream, which
// the SDKs raise. The client going away cancels the job and frees its
// slot.
func (s *Server) streamImage(ctx context.Context, w http.ResponseWriter, job genq.Job, format string, start time.Time, log *slog.Logger) {
	if s.streamer == nil {
		writeV1Error(w, log, genq.Errorf(genq.Invalid, "streaming is not supported by this server; send stream: false"))
		return
	}
	out := sse{w: w, rc: http.NewResponseController(w)}
	event := func(e openai.ImageStreamEvent) error {
		data, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return out.write("event: " + e.Type + "\ndata: " + string(data) + "\n\n")
	}
	imageEvent := func(kind string, data []byte, format string) openai.ImageStreamEvent {
		size := ""
		if w, h, ok := imageSize(bytes.NewReader(data)); ok {
			size = fmt.Sprintf("%dx%d", w, h)
		}
		return openai.ImageStreamEvent{Type: kind, B64JSON: base64.StdEncoding.EncodeToString(data), CreatedAt: start.Unix(),
			Size: size, Quality: "auto", Background: "opaque", OutputFormat: format}
	}
	res, err := s.runJob(ctx, job, start, log, func(ctx context.Context, job genq.Job) (*genq.ReceivedResult, error) {
		return s.streamer.RunImageStream(ctx, job, func(p genq.ImagePiece) error {
			e := imageEvent(openai.EventPartialImage, p.Data, strings.TrimPrefix(p.ContentType, "image/"))
			e.PartialImageIndex = &p.Index
			return event(e)
		})
	})
	var data []byte
	if err == nil {
		defer res.Body.Close()
		if data, err = readImage(res); err != nil {
			err = fmt.Errorf("job %s: %w", job.ID, err)
		}
	}
	if err != nil {
		if !out.started {
			writeV1Error(w, log, err)
			return
		}
		_ = out.event(openai.ErrorResponse{Error: openai.ErrorOf(err)})
		return
	}
	if err := event(imageEvent(openai.EventImageCompleted, data, format)); err != nil {
		log.Info("stream client went away at its end", "err", err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	logDone(log, start, res, "stream", true)
}
