package genq

import "strings"

// ImageRequest is what a job of the image variant (C) asks for besides its
// envelope, whose text is the image's prompt; all optional: zero takes the
// worker's setting. TextRequest's Seed is the image's noise seed, and its
// Stream asks for the previews PartialImages counts.
type ImageRequest struct {
	// Width and Height go together; NegativePrompt steers the image away
	// from its text.
	NegativePrompt string   `json:"negative_prompt,omitempty"`
	Width          int      `json:"width,omitempty"`
	Height         int      `json:"height,omitempty"`
	Steps          int      `json:"num_inference_steps,omitempty"`
	GuidanceScale  *float64 `json:"guidance_scale,omitempty"`
	// OutputFormat is the image's format, ImagePNG (the default) or
	// ImageJPEG; OutputCompression is JPEG's quality, 0 to 100.
	OutputFormat      string `json:"output_format,omitempty"`
	OutputCompression *int   `json:"output_compression,omitempty"`
	// PartialImages asks a streaming image job (Stream) for this many
	// previews along its denoising, 0 to MaxPartialImages.
	PartialImages int `json:"partial_images,omitempty"`
}

// HasImageParams reports whether the job sets any image parameter.
func (j ImageRequest) HasImageParams() bool {
	return j.NegativePrompt != "" || j.Width != 0 || j.Height != 0 || j.Steps != 0 || j.GuidanceScale != nil ||
		j.OutputFormat != "" || j.OutputCompression != nil || j.PartialImages != 0
}

func (j ImageRequest) validateImageParams() error {
	switch {
	case (j.Width == 0) != (j.Height == 0):
		return Errorf(Invalid, "width and height go together: give both or neither")
	case j.Width != 0:
		if err := ValidateImageSize(j.Width, j.Height, MaxImageSide); err != nil {
			return err
		}
	}
	if j.Steps < 0 || j.Steps > MaxImageSteps {
		return Errorf(Invalid, "num_inference_steps must be between 1 and %d, not %d", MaxImageSteps, j.Steps)
	}
	if g := j.GuidanceScale; g != nil && !(*g >= 0 && *g <= MaxGuidanceScale) { // NaN fails too
		return Errorf(Invalid, "guidance_scale must be between 0 and %g, not %v", MaxGuidanceScale, *g)
	}
	switch j.OutputFormat {
	case "", ImagePNG:
		if j.OutputCompression != nil {
			return Errorf(Invalid, "output_compression applies to jpeg only: send output_format jpeg, or leave output_compression out")
		}
	case ImageJPEG:
		if c := j.OutputCompression; c != nil && (*c < 0 || *c > 100) {
			return Errorf(Invalid, "output_compression must be between 0 and 100, not %d", *c)
		}
	default:
		return Errorf(Invalid, "output_format must be png or jpeg, not %q", j.OutputFormat)
	}
	if j.PartialImages < 0 || j.PartialImages > MaxPartialImages {
		return Errorf(Invalid, "partial_images must be between 0 and %d, not %d", MaxPartialImages, j.PartialImages)
	}
	if strings.ContainsRune(j.NegativePrompt, 0) {
		return Errorf(Invalid, "negative_prompt must not contain NUL characters")
	}
	return nil
}
