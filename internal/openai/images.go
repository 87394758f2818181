package openai

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// ImageLimits bound what one image request may ask for. The api takes
// MaxSize and MaxSteps from the live workers' heartbeats (their
// IMAGE_MAX_SIZE and IMAGE_MAX_STEPS), and the workers check them again.
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

// WithDefaults is l with the defaults where it sets nothing.
func (l ImageLimits) WithDefaults() ImageLimits {
	return ImageLimits{MaxSize: cmp.Or(l.MaxSize, DefaultImageMaxSize), MaxSteps: cmp.Or(l.MaxSteps, DefaultImageMaxSteps),
		MaxN: cmp.Or(l.MaxN, DefaultImageMaxN)}
}

// ImageRequest is the body of POST /v1/images/generations: OpenAI's fields
// and genq's own diffusion parameters beside them.
type ImageRequest struct {
	Model          string   `json:"model"`
	Prompt         *string  `json:"prompt"`
	N              *int     `json:"n"`
	Size           string   `json:"size"`
	ResponseFormat string   `json:"response_format"`
	NegativePrompt string   `json:"negative_prompt"`
	Steps          *int     `json:"num_inference_steps"`
	GuidanceScale  *float64 `json:"guidance_scale"`
	Seed           *int64   `json:"seed"`
	// OutputFormat is png (the default) or jpeg, whose quality is
	// OutputCompression (0 to 100, default 100), as OpenAI names them.
	OutputFormat      string `json:"output_format"`
	OutputCompression *int   `json:"output_compression"`
	// Stream answers with server-sent events: PartialImages previews
	// (0 to 3) as the image is made, then the image.
	Stream        bool `json:"stream"`
	PartialImages *int `json:"partial_images"`
}

// Image stream events, OpenAI's.
const (
	EventPartialImage   = "image_generation.partial_image"
	EventImageCompleted = "image_generation.completed"
)

// ImageStreamEvent is one event of a streamed image: a preview
// (PartialImageIndex set) or the image.
type ImageStreamEvent struct {
	Type              string `json:"type"`
	B64JSON           string `json:"b64_json"`
	CreatedAt         int64  `json:"created_at"`
	Size              string `json:"size"`
	Quality           string `json:"quality"`
	Background        string `json:"background"`
	OutputFormat      string `json:"output_format"`
	PartialImageIndex *int   `json:"partial_image_index,omitempty"`
}

// ImagesResponse is the images' answer.
type ImagesResponse struct {
	Created      int64       `json:"created"`
	Data         []ImageData `json:"data"`
	OutputFormat string      `json:"output_format,omitempty"`
}

// ImageData is one image, a PNG or JPEG in base64.
type ImageData struct {
	B64JSON string `json:"b64_json"`
}

// Format is the format of the images the request's jobs make.
func (r ImageRequest) Format() string {
	if r.OutputFormat == "" {
		return genq.ImagePNG
	}
	return r.OutputFormat
}

// ImageJobs turns a request into its jobs, one per image, refusing what
// lim does not allow. The first job is like tmpl (its id, variant and
// deadline); the others take their ids from newID.
func ImageJobs(req ImageRequest, lim ImageLimits, maxPrompt int, tmpl genq.Job, newID func() string) ([]genq.Job, error) {
	lim = lim.WithDefaults()
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
	if len(*req.Prompt) > maxPrompt || len(req.NegativePrompt) > maxPrompt {
		return nil, genq.Errorf(genq.Invalid, "prompt and negative_prompt are limited to %d bytes", maxPrompt)
	}
	if req.Stream && n != 1 {
		return nil, genq.Errorf(genq.Invalid, "stream makes one image: send n 1, or stream false")
	}
	if req.OutputFormat == "webp" {
		return nil, genq.Errorf(genq.Invalid, "output_format webp is not supported: send png or jpeg")
	}
	base := genq.Job{
		Envelope: genq.Envelope{ID: tmpl.ID, Variant: tmpl.Variant, Text: *req.Prompt, Deadline: tmpl.Deadline},
		ImageRequest: genq.ImageRequest{NegativePrompt: req.NegativePrompt, GuidanceScale: req.GuidanceScale,
			OutputFormat: req.OutputFormat, OutputCompression: req.OutputCompression},
	}
	if req.PartialImages != nil {
		if p := *req.PartialImages; p < 0 || p > genq.MaxPartialImages {
			return nil, genq.Errorf(genq.Invalid, "partial_images must be between 0 and %d, not %d", genq.MaxPartialImages, p)
		}
		if req.Stream {
			base.PartialImages = *req.PartialImages
		}
	}
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
		if i > 0 {
			j.ID = newID()
		}
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
