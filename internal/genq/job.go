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
