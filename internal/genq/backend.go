package genq

import "context"

// Backend runs one loaded model. The text backend (internal/textgen, on
// llama.cpp) and the image backends (internal/onnx, internal/ggmlimage)
// implement it; tests use small doubles.
type Backend interface {
	// Info says which device and model the backend runs, and how many jobs
	// it serves at once. The runtime pulls exactly that many jobs.
	Info() BackendInfo

	// Generate runs one job and returns the exact bytes its caller gets.
	//
	// It is called from up to Info().Slots goroutines at once; a backend that
	// batches does so across these calls. ctx ends when the job's deadline
	// passes, its caller cancels it, or the worker gives up on it during a
	// drain: the backend must then stop work on it, free its slot at once,
	// and return an error that wraps ctx.Err().
	//
	// progress says the job is alive, and how far it has got; call it at
	// each step of a long job (each diffusion step, for example). The
	// runtime also keeps every job alive on its own timer, so calling it
	// is optional.
	//
	// A *Error with code Invalid means the job can never succeed
	// (a prompt too long for the context, say): the caller gets it at once
	// and the job is not retried. Any other error is retried on a later
	// delivery, up to the attempt limit.
	Generate(ctx context.Context, job Job, progress func(Progress)) (Result, error)

	// Close frees the model.
	Close() error
}

// Progress is how far a running job has got: Done of Total steps (an
// image's denoising steps); zero where a backend does not count.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}
