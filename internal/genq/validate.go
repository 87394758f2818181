package genq

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Validate checks what every entry point requires of a job before it is
// queued or run: an id the protocol allows, a known variant, one of text,
// messages or prompt, and generation parameters in their ranges. Workers
// check again, since a batch producer can publish anything.
func (j Job) Validate() error {
	if err := ValidateJobID(j.ID); err != nil {
		return err
	}
	switch j.Variant {
	case VariantA, VariantB, VariantC:
	default:
		return Errorf(Invalid, "job %s: unknown variant %q: want A, B or C", j.ID, j.Variant)
	}
	if j.Variant.Kind() == OutputText && j.HasImageParams() {
		return Errorf(Invalid, "negative_prompt, width, height, num_inference_steps, guidance_scale, output_format, output_compression and partial_images are for images; variant %s makes text", j.Variant)
	}
	if j.Variant.Kind() == OutputImage && (len(j.Messages) > 0 || j.Prompt != "" || len(j.PromptTokenIDs) > 0) {
		return Errorf(Invalid, "variant %s makes images from text: messages and prompt are for the text variants", j.Variant)
	}
	return j.ValidateInput()
}

// ValidateInput checks what a backend needs of a job: one of text,
// messages or prompt, and generation parameters in their ranges.
func (j Job) ValidateInput() error {
	inputs := 0
	for _, set := range []bool{j.Text != "", len(j.Messages) > 0, j.Prompt != "", len(j.PromptTokenIDs) > 0} {
		if set {
			inputs++
		}
	}
	switch {
	case inputs > 1:
		return Errorf(Invalid, "a job carries one of text, messages, prompt and prompt_token_ids, not %d of them", inputs)
	case len(j.PromptTokenIDs) > MaxPromptTokenIDs:
		return Errorf(Invalid, "prompt holds %d token ids; the limit is %d", len(j.PromptTokenIDs), MaxPromptTokenIDs)
	case len(j.PromptTokenIDs) > 0:
		for _, id := range j.PromptTokenIDs {
			if id < 0 {
				return Errorf(Invalid, "prompt holds the token id %d: ids are not negative", id)
			}
		}
	case len(j.Messages) > 0:
		if err := ValidateMessages(j.Messages); err != nil {
			return err
		}
	case j.Prompt != "":
		if strings.ContainsRune(j.Prompt, 0) {
			return Errorf(Invalid, "prompt must not contain NUL characters")
		}
	default:
		if err := ValidateText(j.Text); err != nil {
			return err
		}
	}
	if err := j.validateImageParams(); err != nil {
		return err
	}
	if err := j.validateStructured(); err != nil {
		return err
	}
	return j.validateParams()
}

// Limits of a job's parameters. MaxStops and the temperature's range are
// OpenAI's; MaxMessages and MaxStopBytes bound the work a job may ask of a
// worker's tokenizer and stop search.
const (
	MaxMessages = 1024
	// MaxPromptTokenIDs bounds a prompt given as token ids: the longest
	// context of the models genq serves.
	MaxPromptTokenIDs = 131072
	MaxStops          = 4
	MaxStopBytes      = 256
	MaxTemperature    = 2.0
	MaxPenalty        = 2.0
	// MaxRepetitionPenalty bounds repetition_penalty, a divisor of logits.
	MaxRepetitionPenalty = 10.0
	MaxLogitBias         = 100.0
	// MaxLogitBiases bounds how many tokens one job may bias.
	MaxLogitBiases = 1024
	// MaxTopLogprobs is OpenAI's bound on top_logprobs.
	MaxTopLogprobs = 20
)

// Limits of a job's image parameters, whatever the worker allows: a worker
// bounds size and steps further by its own settings (IMAGE_MAX_SIZE,
// IMAGE_MAX_STEPS). The VAE works in 8×8 pixel blocks and SD3's transformer
// in 2×2 latent patches, so a side is a multiple of ImageSizeStep.
const (
	ImageSizeStep    = 16
	MinImageSide     = 64
	MaxImageSide     = 4096
	MaxImageSteps    = 1000
	MaxGuidanceScale = 30.0
	// ImagePNG and ImageJPEG are the image formats a job may ask for.
	ImagePNG  = "png"
	ImageJPEG = "jpeg"
	// DefaultJPEGQuality is JPEG's quality when a job gives none: OpenAI's
	// default output_compression.
	DefaultJPEGQuality = 100
	// MaxPartialImages is the most previews a streaming image job may ask
	// for, as OpenAI's partial_images.
	MaxPartialImages = 3
)

// HasImageParams reports whether the job sets any image parameter.
func (j Job) HasImageParams() bool {
	return j.NegativePrompt != "" || j.Width != 0 || j.Height != 0 || j.Steps != 0 || j.GuidanceScale != nil ||
		j.OutputFormat != "" || j.OutputCompression != nil || j.PartialImages != 0
}

// ValidateImageSize checks one width or height, in pixels, against the
// pipeline's constraints and a limit (at most MaxImageSide).
func ValidateImageSize(width, height, limit int) error {
	limit = min(limit, MaxImageSide)
	for _, side := range []int{width, height} {
		if side < MinImageSide || side > limit || side%ImageSizeStep != 0 {
			return Errorf(Invalid, "image size %dx%d: width and height must be multiples of %d from %d to %d",
				width, height, ImageSizeStep, MinImageSide, limit)
		}
	}
	return nil
}

func (j Job) validateImageParams() error {
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

func (j Job) validateParams() error {
	switch {
	case j.MaxTokens < 0:
		return Errorf(Invalid, "max_tokens must be at least 1, not %d", j.MaxTokens)
	case j.MaxCompletionTokens < 0:
		return Errorf(Invalid, "max_completion_tokens must be at least 1, not %d", j.MaxCompletionTokens)
	case j.MaxTokens > 0 && j.MaxCompletionTokens > 0 && j.MaxTokens != j.MaxCompletionTokens:
		return Errorf(Invalid, "max_tokens (%d) and max_completion_tokens (%d) disagree: give one", j.MaxTokens, j.MaxCompletionTokens)
	case j.PromptOnly && !j.Echo:
		return Errorf(Invalid, "max_tokens 0 generates nothing: it is for scoring a prompt, with echo: true")
	case j.PromptOnly && j.MaxNewTokens() > 0:
		return Errorf(Invalid, "prompt_only generates nothing: leave max_tokens out")
	case j.CountOnly && (j.Stream || j.PromptOnly || j.Echo):
		return Errorf(Invalid, "count_only answers a count: it neither streams nor echoes")
	}
	if t := j.Temperature; t != nil && !(*t >= 0 && *t <= MaxTemperature) { // NaN fails too
		return Errorf(Invalid, "temperature must be between 0 and %g, not %v", MaxTemperature, *t)
	}
	if p := j.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return Errorf(Invalid, "top_p must be between 0 and 1, not %v", *p)
	}
	switch {
	case j.TopLogprobs < 0 || j.TopLogprobs > MaxTopLogprobs:
		return Errorf(Invalid, "top_logprobs must be between 0 and %d, not %d", MaxTopLogprobs, j.TopLogprobs)
	case j.TopLogprobs > 0 && !j.Logprobs:
		return Errorf(Invalid, "top_logprobs needs logprobs: true")
	case (j.Logprobs || j.Echo) && !j.Detailed():
		return Errorf(Invalid, "logprobs and echo are for jobs of messages, prompt or prompt_token_ids: a job of text alone keeps the one-field result of POST /generate")
	}
	if k := j.TopK; k != nil && *k < -1 {
		return Errorf(Invalid, "top_k must be -1 or 0 (every token) or a count, not %d", *k)
	}
	if p := j.MinP; p != nil && !(*p >= 0 && *p <= 1) {
		return Errorf(Invalid, "min_p must be between 0 and 1, not %v", *p)
	}
	if p := j.RepetitionPenalty; p != nil && !(*p > 0 && *p <= MaxRepetitionPenalty) {
		return Errorf(Invalid, "repetition_penalty must be above 0 and at most %g (1 is none), not %v", MaxRepetitionPenalty, *p)
	}
	for _, p := range []struct {
		name  string
		value *float64
	}{{"frequency_penalty", j.FrequencyPenalty}, {"presence_penalty", j.PresencePenalty}} {
		if v := p.value; v != nil && !(*v >= -MaxPenalty && *v <= MaxPenalty) { // NaN fails too
			return Errorf(Invalid, "%s must be between %g and %g, not %v", p.name, -MaxPenalty, MaxPenalty, *v)
		}
	}
	if len(j.LogitBias) > MaxLogitBiases {
		return Errorf(Invalid, "logit_bias holds %d tokens; the limit is %d", len(j.LogitBias), MaxLogitBiases)
	}
	for id, bias := range j.LogitBias {
		switch {
		case id < 0:
			return Errorf(Invalid, "logit_bias names token %d: token ids are not negative", id)
		case !(bias >= -MaxLogitBias && bias <= MaxLogitBias):
			return Errorf(Invalid, "logit_bias for token %d must be between %g and %g, not %v", id, -MaxLogitBias, MaxLogitBias, bias)
		}
	}
	if len(j.Stop) > MaxStops {
		return Errorf(Invalid, "stop holds %d strings; the limit is %d", len(j.Stop), MaxStops)
	}
	for _, s := range j.Stop {
		switch {
		case s == "":
			return Errorf(Invalid, "stop strings must not be empty")
		case len(s) > MaxStopBytes:
			return Errorf(Invalid, "a stop string is %d bytes long; the limit is %d", len(s), MaxStopBytes)
		case !utf8.ValidString(s):
			return Errorf(Invalid, "stop strings must be valid UTF-8")
		}
	}
	return nil
}

// ValidateMessages checks a chat: at most MaxMessages turns, each with a
// known role and no NUL, and at least one with content or a tool call.
// Tool calls belong to the assistant, and a tool's turn names the call it
// answers.
func ValidateMessages(msgs []Message) error {
	if len(msgs) == 0 {
		return Errorf(Invalid, "messages must hold at least one message")
	}
	if len(msgs) > MaxMessages {
		return Errorf(Invalid, "messages holds %d messages; the limit is %d", len(msgs), MaxMessages)
	}
	content := false
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return Errorf(Invalid, "messages[%d]: role %q is not one of system, user, assistant and tool", i, m.Role)
		}
		if strings.ContainsRune(m.Content, 0) {
			return Errorf(Invalid, "messages[%d]: content must not contain NUL characters", i)
		}
		if err := validateToolTurn(i, m); err != nil {
			return err
		}
		content = content || strings.TrimSpace(m.Content) != "" || len(m.ToolCalls) > 0
	}
	if !content {
		return Errorf(Invalid, "messages must hold some content")
	}
	return nil
}

func validateToolTurn(i int, m Message) error {
	switch {
	case len(m.ToolCalls) > 0 && m.Role != RoleAssistant:
		return Errorf(Invalid, "messages[%d]: only an assistant's message holds tool_calls", i)
	case m.Role == RoleTool && m.ToolCallID == "":
		return Errorf(Invalid, "messages[%d]: a tool's message needs tool_call_id", i)
	case m.Role != RoleTool && m.ToolCallID != "":
		return Errorf(Invalid, "messages[%d]: only a tool's message holds tool_call_id", i)
	}
	for k, c := range m.ToolCalls {
		if c.Function.Name == "" {
			return Errorf(Invalid, "messages[%d].tool_calls[%d].function.name is required", i, k)
		}
		if !json.Valid([]byte(c.Function.Arguments)) {
			return Errorf(Invalid, "messages[%d].tool_calls[%d].function.arguments is not JSON", i, k)
		}
	}
	return nil
}

// MaxJobIDLen is the longest job id.
const MaxJobIDLen = 128

// ValidateJobID checks a job id: 1 to 128 characters of A-Z, a-z, 0-9, -
// and _. The id travels as a subject token, an object name in the results
// store and a key in the cancel bucket, and all three accept these.
func ValidateJobID(id string) error {
	ok := len(id) >= 1 && len(id) <= MaxJobIDLen
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
	}
	if !ok {
		return Errorf(Invalid, "job id %q: want 1 to %d characters of A-Z, a-z, 0-9, - and _", id, MaxJobIDLen)
	}
	return nil
}

// ValidateText checks a prompt: it is required. Entry points add limits of
// their own (the api's MAX_PROMPT_BYTES, for one).
func ValidateText(text string) error {
	if text == "" {
		return Errorf(Invalid, "text field is required")
	}
	return nil
}
