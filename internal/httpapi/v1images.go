package httpapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
)

// POST /v1/images/generations: OpenAI's image route for variant C, with
// genq's own diffusion parameters beside OpenAI's fields. Each image is one
// job on the queue, so n images run on as many free worker slots.

// ImageLimits bound what one image request may ask for. The workers check
// their own (IMAGE_MAX_SIZE, IMAGE_MAX_STEPS) again; give both the same.
type ImageLimits struct {
	MaxSize  int // largest width or height, in pixels
	MaxSteps int // most denoising steps
	MaxN     int // most images per request
}

// Defaults of ImageLimits: variant C's size, and a few images per request.
const (
	DefaultImageMaxSize  = 1024
	DefaultImageMaxSteps = 100
	DefaultImageMaxN     = 4
)

func (l ImageLimits) withDefaults() ImageLimits {
	return ImageLimits{MaxSize: cmp.Or(l.MaxSize, DefaultImageMaxSize), MaxSteps: cmp.Or(l.MaxSteps, DefaultImageMaxSteps),
		MaxN: cmp.Or(l.MaxN, DefaultImageMaxN)}
}

type imageRequest struct {
	Model          string   `json:"model"`
	Prompt         *string  `json:"prompt"`
	N              *int     `json:"n"`
	Size           string   `json:"size"`
	ResponseFormat string   `json:"response_format"`
	NegativePrompt string   `json:"negative_prompt"`
	Steps          *int     `json:"num_inference_steps"`
	GuidanceScale  *float64 `json:"guidance_scale"`
	Seed           *int64   `json:"seed"`
}

type imagesResponse struct {
	Created int64       `json:"created"`
	Data    []imageData `json:"data"`
}

type imageData struct {
	B64JSON string `json:"b64_json"`
}

// maxImageResult bounds the PNG the api reads into memory to encode it:
// a 4096×4096 RGB image of noise is about 50 MB.
const maxImageResult = 64 << 20

// imageJobs turns a request into its jobs, one per image, refusing what
// this deployment cannot give in OpenAI's error shape.
func (s *Server) imageJobs(req imageRequest, deadline time.Time) ([]genq.Job, error) {
	lim := s.cfg.Images.withDefaults()
	n := 1
	if req.N != nil {
		n = *req.N
	}
	if n < 1 || n > lim.MaxN {
		return nil, genq.Errorf(genq.Invalid, "n must be between 1 and %d, not %d", lim.MaxN, n)
	}
	switch req.ResponseFormat {
	case "", "b64_json":
	case "url":
		return nil, genq.Errorf(genq.Invalid, "response_format url is not supported: this server returns images inline; send response_format: b64_json")
	default:
		return nil, genq.Errorf(genq.Invalid, "response_format must be b64_json, not %q", req.ResponseFormat)
	}
	if req.Prompt == nil || *req.Prompt == "" {
		return nil, genq.Errorf(genq.Invalid, "prompt is required")
	}
	if len(*req.Prompt) > s.cfg.MaxPromptBytes || len(req.NegativePrompt) > s.cfg.MaxPromptBytes {
		return nil, genq.Errorf(genq.Invalid, "prompt and negative_prompt are limited to %d bytes", s.cfg.MaxPromptBytes)
	}
	base := genq.Job{Variant: s.cfg.Variant, Text: *req.Prompt, NegativePrompt: req.NegativePrompt,
		GuidanceScale: req.GuidanceScale, Deadline: deadline}
	if req.Size != "" && req.Size != "auto" {
		w, h, ok := parseSize(req.Size)
		if !ok {
			return nil, genq.Errorf(genq.Invalid, "size must be WIDTHxHEIGHT (for example 1024x1024) or auto, not %q", req.Size)
		}
		if err := genq.ValidateImageSize(w, h, lim.MaxSize); err != nil {
			return nil, err
		}
		base.Width, base.Height = w, h
	}
	if req.Steps != nil {
		if *req.Steps < 1 || *req.Steps > lim.MaxSteps {
			return nil, genq.Errorf(genq.Invalid, "num_inference_steps must be between 1 and %d, not %d", lim.MaxSteps, *req.Steps)
		}
		base.Steps = *req.Steps
	}
	jobs := make([]genq.Job, n)
	for i := range jobs {
		j := base
		j.ID = s.newID()
		if req.Seed != nil {
			// n images of one seed would be n copies: each gets the next.
			seed := *req.Seed + int64(i)
			j.Seed = &seed
		}
		if err := j.Validate(); err != nil {
			return nil, err
		}
		jobs[i] = j
	}
	return jobs, nil
}

func parseSize(s string) (w, h int, ok bool) {
	ws, hs, found := strings.Cut(s, "x")
	if !found {
		return 0, 0, false
	}
	w, errW := strconv.Atoi(ws)
	h, errH := strconv.Atoi(hs)
	return w, h, errW == nil && errH == nil
}

func (s *Server) handleImageGenerations(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, ok := s.requestBody(w, r, writeV1Error)
	if !ok {
		return
	}
	if s.cfg.Variant.Kind() != genq.OutputImage {
		s.rejectAs(w, genq.Errorf(genq.Invalid, "variant %s makes text: %s needs the image variant (C); use /v1/chat/completions",
			s.cfg.Variant, r.URL.Path), writeV1Error)
		return
	}
	var req imageRequest
	err := decodeV1(body, &req)
	var jobs []genq.Job
	if err == nil {
		jobs, err = s.imageJobs(req, start.Add(s.cfg.JobTimeout))
	}
	if err != nil {
		s.rejectAs(w, err, writeV1Error)
		return
	}
	log := s.log.With("job_id", jobs[0].ID, "route", r.URL.Path, "n", len(jobs))
	w.Header().Set(HeaderJobID, jobs[0].ID)

	ctx, cancel := context.WithDeadline(r.Context(), jobs[0].Deadline)
	defer cancel()
	images, err := s.runImages(ctx, jobs)
	if err != nil {
		if errCtx := context.Cause(ctx); errCtx == errShuttingDown {
			err = errShuttingDown
		}
		s.metrics.generateSeconds.WithLabelValues(string(genq.ErrorCode(err))).Observe(time.Since(start).Seconds())
		log.Info("generate failed", "code", genq.ErrorCode(err), "err", err, "ms", time.Since(start).Milliseconds())
		writeV1Error(w, log, err)
		return
	}
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	writeJSON(w, http.StatusOK, imagesResponse{Created: start.Unix(), Data: images})
	log.Info("generate done", "ms", time.Since(start).Milliseconds())
}

// runImages runs the jobs at once and returns their images in order.
func (s *Server) runImages(ctx context.Context, jobs []genq.Job) ([]imageData, error) {
	return runAll(ctx, jobs, func(ctx context.Context, _ int, job genq.Job) (imageData, error) {
		b64, err := s.runImage(ctx, job)
		return imageData{B64JSON: b64}, err
	})
}

func (s *Server) runImage(ctx context.Context, job genq.Job) (string, error) {
	s.metrics.inFlight.Inc()
	answer, err := s.jobs.Run(ctx, job)
	s.metrics.inFlight.Dec()
	if err != nil {
		return "", err
	}
	defer answer.Body.Close()
	s.metrics.queueWait.Observe(answer.QueueWait.Seconds())
	s.metrics.jobSeconds.Observe(answer.RunTime.Seconds())
	data, err := io.ReadAll(io.LimitReader(answer.Body, maxImageResult))
	if err != nil {
		return "", fmt.Errorf("read the image of job %s: %w", job.ID, err)
	}
	return base64.StdEncoding.EncodeToString(data), nil
}
