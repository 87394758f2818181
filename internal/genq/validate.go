package genq

import (
	"encoding/json"
	"strings"
)

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

// ValidateMessages checks a chat: at most MaxMessages turns, each with a
// known role, and at least one with content or a tool call. A NUL is
// served: the worker tokenizes it as the byte it is.
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
		if m.ReasoningContent != "" && m.Role != RoleAssistant {
			return Errorf(Invalid, "messages[%d]: only an assistant's turn carries reasoning_content", i)
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
