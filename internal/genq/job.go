package genq

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// Job is one generation request as it travels on the queue. Its JSON form is
// the job message of docs/protocol.md: one object that holds the fields of
// its parts side by side, as Go promotes them (job.Temperature is
// job.TextRequest.Temperature), in the order they are declared, which is
// the message's (testdata/job_*.json hold it byte for byte). The Envelope
// is what every variant reads, the job of text alone that it always was;
// the TextRequest and the ImageRequest are what a request of the text or
// the image variants asks for besides, all optional: a job of text alone
// is generated with the worker's settings. The EmbeddingRequest is an
// embedding job's (job_embed.go): its inputs make it one.
type Job struct {
	Envelope
	TextRequest
	ImageRequest
	EmbeddingRequest
}

// Envelope is what every job carries: who it is, which variant runs it,
// its text when it is a job of text alone (an image's prompt), until when
// it may run, and where its result goes.
type Envelope struct {
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
	// KeepAlive is how long, in seconds, the worker keeps the job's model
	// loaded once idle: KeepForever keeps it, 0 unloads it after the
	// answer. Nil: the worker's KEEP_ALIVE. Only a worker serving several
	// models reads it.
	KeepAlive *float64 `json:"keep_alive,omitempty"`

	// Attempt is which delivery of the job this is, counted from 1. It comes
	// from JetStream's metadata, never from the message body.
	Attempt int `json:"-"`
}

// KeepForever is the keep_alive that keeps a model loaded, as Ollama's -1.
const KeepForever = -1

// Expired reports whether the job's deadline has passed at now.
func (e Envelope) Expired(now time.Time) bool {
	return !e.Deadline.IsZero() && !now.Before(e.Deadline)
}

// Validate checks what every entry point requires of a job before it is
// queued or run: an id the protocol allows, a known variant, one of text,
// messages or prompt, and generation parameters in their ranges. Workers
// check again, since a batch producer can publish anything.
func (j Job) Validate() error {
	if err := ValidateJobID(j.ID); err != nil {
		return err
	}
	if j.IsEmbedding() {
		return j.validateEmbedding()
	}
	if j.Variant.Kind() == OutputEmbedding {
		return &Error{Code: Invalid, Field: "input", Message: fmt.Sprintf("job %s: an embedding model's queue %s takes embedding jobs: give inputs", j.ID, j.Variant)}
	}
	switch j.Variant {
	case VariantA, VariantB, VariantC:
	default:
		if !IsModelQueue(j.Variant) {
			return Errorf(Invalid, "job %s: unknown variant %q: want A, B, C or a model's queue token", j.ID, j.Variant)
		}
	}
	if j.KeepAlive != nil && *j.KeepAlive < 0 && *j.KeepAlive != KeepForever {
		return Errorf(Invalid, "keep_alive must be -1 (keep loaded), 0 (unload after the answer) or a number of seconds, not %g", *j.KeepAlive)
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
	if j.IsEmbedding() {
		return &Error{Code: Invalid, Field: "input", Message: "an embedding job reached a model that makes text or images"}
	}
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

// affinityPromptBytes is how much of a raw prompt names the conversation it
// belongs to: a later turn repeats the earlier prompt whole, so any prefix
// of it is stable, and a short one costs nothing to hash.
const affinityPromptBytes = 64

// affinityPromptTokens is the same bound for a prompt given as token ids.
const affinityPromptTokens = 16

// AffinityKey names what every later turn of the job's conversation
// repeats, so a queue can send those turns to the worker whose prefix
// cache holds it. It is a hash: for a chat, of its messages up to and
// including the first user message (the system prompt and the opening
// question), as JSON; for a raw prompt or a job of text alone, of its
// first bytes (or token ids). A job with nothing to key on has "".
// The api cannot tokenize, so the key is a guess at the prefix, never a
// promise: a wrong guess costs only the cache hit.
func (j Job) AffinityKey() string {
	h := sha256.New()
	switch {
	case len(j.Messages) > 0:
		end := len(j.Messages)
		for i, m := range j.Messages {
			if m.Role == RoleUser {
				end = i + 1
				break
			}
		}
		b, err := json.Marshal(j.Messages[:end])
		if err != nil {
			return ""
		}
		h.Write([]byte("messages\x00"))
		h.Write(b)
	case j.Prompt != "":
		h.Write([]byte("prompt\x00"))
		h.Write([]byte(j.Prompt[:min(len(j.Prompt), affinityPromptBytes)]))
	case len(j.PromptTokenIDs) > 0:
		h.Write([]byte("tokens\x00"))
		for _, id := range j.PromptTokenIDs[:min(len(j.PromptTokenIDs), affinityPromptTokens)] {
			h.Write(binary.LittleEndian.AppendUint32(nil, uint32(id)))
		}
	case j.Text != "":
		h.Write([]byte("prompt\x00"))
		h.Write([]byte(j.Text[:min(len(j.Text), affinityPromptBytes)]))
	default:
		return ""
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
