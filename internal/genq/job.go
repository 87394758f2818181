package genq

import (
	"encoding/json"
	"io"
	"time"
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

	// Attempt is which delivery of the job this is, counted from 1. It comes
	// from JetStream's metadata, never from the message body.
	Attempt int `json:"-"`
}

// Validate checks what every entry point requires of a job before it is
// queued or run: an id the protocol allows, a known variant, and text.
func (j Job) Validate() error {
	if err := ValidateJobID(j.ID); err != nil {
		return err
	}
	switch j.Variant {
	case VariantA, VariantB, VariantC:
	default:
		return Errorf(Invalid, "job %s: unknown variant %q: want A, B or C", j.ID, j.Variant)
	}
	return ValidateText(j.Text)
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

// Answer is a job's successful result as its producer receives it, the
// other end of the worker's reply. Body streams the bytes, from the reply
// message itself or from the results store; the receiver must close it.
type Answer struct {
	JobID       string
	ContentType string
	Size        int64
	Body        io.ReadCloser
	QueueWait   time.Duration
	RunTime     time.Duration
	Attempt     int
	Worker      string
}

// TextResponse is the body of a text result, the same JSON on the queue and
// over HTTP.
type TextResponse struct {
	GeneratedText string `json:"generated_text"`
}

// NewTextResult wraps generated text as the JSON body variants A and B return.
func NewTextResult(text string) Result {
	b, _ := json.Marshal(TextResponse{GeneratedText: text}) // a struct of one string cannot fail
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
