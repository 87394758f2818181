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
	// Gather is how many jobs already waiting the worker may pull in one
	// fetch, for a backend that runs many jobs' work in one step
	// (embeddings): their work then waits for them all (Gathering). 0 or
	// 1: a job a fetch.
	Gather int `json:"gather,omitempty"`
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
	Limits *Limits `json:"limits,omitempty"`
	// ModelState is set by a worker serving several models, which beats
	// once per model it can serve (docs/protocol.md §6): loaded, loading
	// or unloaded (it loads the model when a job comes), or unloadable.
	// Absent: the worker's one model is loaded.
	ModelState ModelState `json:"model_state,omitempty"`
	// LoadProgress is how far a loading model is, from 0 to 1.
	LoadProgress float64 `json:"load_progress,omitempty"`
	// LoadError says why the worker can never load the model (state
	// unloadable), in words for the request the api refuses with it.
	LoadError string    `json:"load_error,omitempty"`
	StartedAt time.Time `json:"started_at"`
	At        time.Time `json:"at"`
}

// ModelState is where a worker's model is in its life.
type ModelState string

const (
	ModelLoaded   ModelState = "loaded"
	ModelLoading  ModelState = "loading"
	ModelUnloaded ModelState = "unloaded"
	// ModelUnloadable: the worker can never load the model (it is over
	// the worker's memory budget); it pulls none of its jobs.
	ModelUnloadable ModelState = "unloadable"
)

// Loaded reports whether the beat's model is in memory: a worker of one
// model always is.
func (hb Heartbeat) Loaded() bool { return hb.ModelState == "" || hb.ModelState == ModelLoaded }
