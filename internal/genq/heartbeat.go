package genq

import (
	"time"
)

// Device is what a worker computes on.
type Device struct {
	Kind string `json:"kind"`           // "cpu" or "cuda"
	Name string `json:"name,omitempty"` // the GPU's name, or the CPU model
	// Engine runs the model on the device, where a variant has a choice
	// (images: "onnxruntime" or "ggml"; text: "ggml").
	Engine string `json:"engine,omitempty"`
}

// IsCUDA reports whether the device is an NVIDIA GPU.
func (d Device) IsCUDA() bool { return d.Kind == "cuda" }

// BackendInfo is what a loaded model says about itself.
type BackendInfo struct {
	Device Device `json:"device"`
	Model  string `json:"model"`
	// Slots is how many jobs the backend runs at once.
	Slots int `json:"slots"`
	// Limits bound the jobs the model can serve.
	Limits Limits `json:"limits"`
}

// Heartbeat is what a live worker publishes about itself, every few seconds.
type Heartbeat struct {
	WorkerID  string  `json:"worker_id"`
	Variant   Variant `json:"variant"`
	Device    Device  `json:"device"`
	Model     string  `json:"model"`
	Slots     int     `json:"slots"`
	FreeSlots int     `json:"free_slots"`
	Draining  bool    `json:"draining,omitempty"`
	// Routed says the worker pulls its own subject before the shared one
	// (ROUTE_BY_PREFIX), so a producer may send it the jobs whose prefix it
	// holds; absent from workers that do not.
	Routed bool `json:"routed,omitempty"`
	// Limits let the api refuse at once a job this worker would refuse;
	// absent from workers older than the field.
	Limits    *Limits   `json:"limits,omitempty"`
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"`
}
