package genq

import (
	"encoding/json"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Job is one generation request as it travels on the queue. Its JSON form is
// the job message of docs/protocol.md.
type Job struct {
	// ID is a UUID; it is also the message's Nats-Msg-Id, so a job published
	// twice inside the dedup window runs once.
	ID      string  `json:"id"`
	Variant Variant `json:"variant"`
	Text    string  `json:"text"`
	// Deadline is when the caller stops waiting. A worker drops a job whose
	// deadline has passed, and a running job's context ends at it.
	Deadline time.Time `json:"deadline"`
	// ReplyTo is the core NATS subject the result is published to. Empty
	// means nobody listens: the result is only kept in the results store.
	ReplyTo string `json:"reply_to,omitempty"`
	// Store asks the worker to keep the result in the results store, so it
	// can be fetched later by job id, even when it was also replied.
	Store bool `json:"store,omitempty"`

	// The fields below are a request's own generation parameters, all
	// optional: a job of text alone is generated with the worker's settings.

	// Messages is a chat, rendered with the model's chat template; Prompt is
	// raw text, given to the model as it is (completions). A job carries
	// exactly one of Text, Messages, Prompt and PromptTokenIDs.
	Messages []Message `json:"messages,omitempty"`
	Prompt   string    `json:"prompt,omitempty"`
	// PromptTokenIDs is a raw prompt already tokenized by its producer,
	// given to the model as it is (no BOS added): OpenAI's completions take
	// a prompt as a list of token ids too.
	PromptTokenIDs []int32 `json:"prompt_token_ids,omitempty"`
	// MaxTokens bounds the answer, in tokens; 0 takes the worker's limit,
	// and more than that limit is invalid. MaxCompletionTokens is the same
	// setting under OpenAI's newer name; a job may give either.
	MaxTokens           int `json:"max_tokens,omitempty"`
	MaxCompletionTokens int `json:"max_completion_tokens,omitempty"`
	// Temperature (0 to 2; 0 is greedy), TopP (0 to 1) and Seed override
	// the worker's sampling settings when set.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	Seed        *int64   `json:"seed,omitempty"`
	// TopK (-1 or 0: every token) and MinP (0 to 1) are the extensions vLLM
	// and llama.cpp's server take beside OpenAI's fields; they override the
	// worker's top-k and its min-p of 0.
	TopK *int     `json:"top_k,omitempty"`
	MinP *float64 `json:"min_p,omitempty"`
	// RepetitionPenalty (above 0; 1 is none) is vLLM's and Hugging Face's:
	// the logit of every token in the prompt or the answer so far is
	// divided by it when positive, multiplied when negative.
	RepetitionPenalty *float64 `json:"repetition_penalty,omitempty"`
	// IgnoreEOS (vLLM's) generates past end-of-turn tokens to the token
	// limit, for benchmarks that want answers of a fixed length.
	IgnoreEOS bool `json:"ignore_eos,omitempty"`
	// FrequencyPenalty and PresencePenalty (-2 to 2) lower the logit of
	// every token the answer already holds, by the penalty times its count
	// and by the penalty once; LogitBias (-100 to 100 each) is added to the
	// logits of the token ids it names. OpenAI's definitions; in JSON the
	// ids are strings, as OpenAI's clients send them.
	FrequencyPenalty *float64          `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64          `json:"presence_penalty,omitempty"`
	LogitBias        map[int32]float64 `json:"logit_bias,omitempty"`
	// Logprobs asks for each answer token's log-probability under the
	// model's own distribution (the softmax of its raw logits, before
	// temperature, penalties and biases, as vLLM reports them), and
	// TopLogprobs (0 to MaxTopLogprobs) for that many of the most likely
	// tokens at each position. Detailed results only.
	Logprobs    bool `json:"logprobs,omitempty"`
	TopLogprobs int  `json:"top_logprobs,omitempty"`
	// Echo asks for the prompt back with the answer (prompt_text), scored
	// token by token when Logprobs is set too (prompt_logprobs): what
	// evaluation harnesses read a prompt's likelihood from. Detailed
	// results only; streaming ones give it whole with the reply.
	Echo bool `json:"echo,omitempty"`
	// Stop ends the answer before the first of these strings, which the
	// answer never holds. In JSON, a string or a list of strings.
	Stop StopList `json:"stop,omitempty"`
	// Stream asks a worker whose backend can (TextStreamer) to publish the
	// answer's text to ReplyTo as it is sampled, before the usual reply
	// (docs/protocol.md, "Streaming").
	Stream bool `json:"stream,omitempty"`

	// Image parameters (variant C), all optional: zero takes the worker's
	// setting. Seed above is the image's noise seed too. Width and Height
	// go together; NegativePrompt steers the image away from its text.
	NegativePrompt string   `json:"negative_prompt,omitempty"`
	Width          int      `json:"width,omitempty"`
	Height         int      `json:"height,omitempty"`
	Steps          int      `json:"num_inference_steps,omitempty"`
	GuidanceScale  *float64 `json:"guidance_scale,omitempty"`

	// Attempt is which delivery of the job this is, counted from 1. It comes
	// from JetStream's metadata, never from the message body.
	Attempt int `json:"-"`
}

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
		return Errorf(Invalid, "negative_prompt, width, height, num_inference_steps and guidance_scale are for images; variant %s makes text", j.Variant)
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
)

// HasImageParams reports whether the job sets any image parameter.
func (j Job) HasImageParams() bool {
	return j.NegativePrompt != "" || j.Width != 0 || j.Height != 0 || j.Steps != 0 || j.GuidanceScale != nil
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

// MaxNewTokens is the answer's token limit the job asks for, 0 when it
// leaves it to the worker.
func (j Job) MaxNewTokens() int { return max(j.MaxTokens, j.MaxCompletionTokens) }

// Detailed reports whether the job's result carries its finish reason and
// token counts besides the text: chats and raw prompts do, and a job of
// text alone keeps POST /generate's result of one field.
func (j Job) Detailed() bool {
	return len(j.Messages) > 0 || j.Prompt != "" || len(j.PromptTokenIDs) > 0
}

// Chat roles.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of a chat.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ValidateMessages checks a chat: at most MaxMessages turns, each with a
// known role and no NUL, and at least one with content.
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
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			return Errorf(Invalid, "messages[%d]: role %q is not one of system, user and assistant", i, m.Role)
		}
		if strings.ContainsRune(m.Content, 0) {
			return Errorf(Invalid, "messages[%d]: content must not contain NUL characters", i)
		}
		content = content || strings.TrimSpace(m.Content) != ""
	}
	if !content {
		return Errorf(Invalid, "messages must hold some content")
	}
	return nil
}

// StopList is a job's stop strings. Its JSON is a list, and a single string
// is read as a list of one, as OpenAI's API allows.
type StopList []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *StopList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StopList{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return Errorf(Invalid, "stop must be a string or a list of strings")
	}
	*s = list
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

// Expired reports whether the job's deadline has passed at now.
func (j Job) Expired(now time.Time) bool {
	return !j.Deadline.IsZero() && !now.Before(j.Deadline)
}

// Result is what a backend produces: the exact bytes a caller receives, and
// their media type.
type Result struct {
	ContentType string
	Data        []byte
}

// ReceivedResult is a job's successful result as its producer receives it, the
// other end of the worker's reply. Body streams the bytes, from the reply
// message itself or from the results store; the receiver must close it.
type ReceivedResult struct {
	JobID       string
	ContentType string
	Size        int64
	Body        io.ReadCloser
	QueueWait   time.Duration
	RunTime     time.Duration
	Attempt     int
	Worker      string
}

// TextResult is the body of a text result, the same JSON on the queue and
// over HTTP /generate. A detailed job's result (Job.Detailed) also says why
// the answer ended and how many tokens it took, from which the api builds
// OpenAI's objects.
type TextResult struct {
	GeneratedText string `json:"generated_text"`
	// FinishReason is FinishStop or FinishLength.
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        *Usage `json:"usage,omitempty"`
	// Logprobs has one entry per token of the text, in order, when the job
	// asked for them.
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`
	// PromptText is the prompt's text as the model read it, and
	// PromptLogprobs an entry per prompt token (the first unscored: logprob
	// 0, no alternatives), when the job asked for its prompt echoed.
	PromptText     string         `json:"prompt_text,omitempty"`
	PromptLogprobs []TokenLogprob `json:"prompt_logprobs,omitempty"`
}

// TokenLogprob is one answer token's log-probability, with the most likely
// tokens at its position when the job asked for them.
type TokenLogprob struct {
	Logprob
	// Offset is where, in bytes, the character that holds the token's
	// first byte starts in the answer's text: the token's own start unless
	// it begins inside a character (byte-level vocabularies split them) or
	// in bytes that are not UTF-8 (which the text holds as U+FFFD).
	Offset int       `json:"offset"`
	Top    []Logprob `json:"top_logprobs,omitempty"`
}

// Logprob is a token's text, its bytes (a token may hold part of a
// character, so the text alone cannot say) and its log-probability.
type Logprob struct {
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float64 `json:"logprob"`
}

// MinLogprob stands for a log-probability of -Inf, which JSON cannot hold:
// vLLM's choice.
const MinLogprob = -9999.0

// Why an answer ended: an end-of-turn token or a stop string, or the token
// limit.
const (
	FinishStop   = "stop"
	FinishLength = "length"
)

// Usage counts a job's tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// NewDetailedTextResult wraps generated text with its finish reason and
// token counts, the result of a detailed job.
func NewDetailedTextResult(text, finishReason string, usage Usage, logprobs []TokenLogprob) Result {
	return TextResult{GeneratedText: text, FinishReason: finishReason, Usage: &usage, Logprobs: logprobs}.Result()
}

// Result is the response as a job's result.
func (r TextResult) Result() Result {
	b, _ := json.Marshal(r) // plain values: cannot fail
	return Result{ContentType: "application/json", Data: b}
}

// NewTextResult wraps generated text as the JSON body variants A and B return.
func NewTextResult(text string) Result {
	b, _ := json.Marshal(TextResult{GeneratedText: text}) // a struct of one string cannot fail
	return Result{ContentType: "application/json", Data: b}
}

// NewImageResult wraps PNG bytes as the body variant C returns.
func NewImageResult(png []byte) Result {
	return Result{ContentType: "image/png", Data: png}
}

// Device is what a worker computes on.
type Device struct {
	Kind string `json:"kind"`           // "cpu" or "cuda"
	Name string `json:"name,omitempty"` // the GPU's name, or the CPU model
}

// IsCUDA reports whether the device is an NVIDIA GPU.
func (d Device) IsCUDA() bool { return d.Kind == "cuda" }

// BackendInfo is what a loaded model says about itself.
type BackendInfo struct {
	Device Device `json:"device"`
	Model  string `json:"model"`
	// Slots is how many jobs the backend runs at once.
	Slots int `json:"slots"`
}

// Heartbeat is what a live worker publishes about itself, every few seconds.
type Heartbeat struct {
	WorkerID  string    `json:"worker_id"`
	Variant   Variant   `json:"variant"`
	Device    Device    `json:"device"`
	Model     string    `json:"model"`
	Slots     int       `json:"slots"`
	FreeSlots int       `json:"free_slots"`
	Draining  bool      `json:"draining,omitempty"`
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"`
}
