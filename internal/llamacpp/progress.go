package llamacpp

import (
	"sync"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// progressRelay hands llama.cpp's load progress (llama_model_params'
// progress_callback) to the load that asked for it. A C callback is a
// purego callback, of which a process has a fixed number, never freed,
// and yzma's SetProgressCallback takes a new one on every call (keeping
// it in package variables, so two calls at once race): one callback,
// made once per process with the Library, serves every load, which its
// user-data word names. That word is an id, not a Go pointer, which C
// must not keep.
type progressRelay struct {
	fn uintptr // the C function pointer

	mu    sync.Mutex
	next  uintptr
	loads map[uintptr]func(float64) bool
}

func newProgressRelay() *progressRelay {
	r := &progressRelay{loads: map[uintptr]func(float64) bool{}}
	var mp llama.ModelParams
	mp.SetProgressCallback(r.call)
	r.fn = mp.ProgressCallback
	return r
}

// call is the C callback: it runs on the loading thread, inside
// llama_model_load_from_file. 0 stops the load.
func (r *progressRelay) call(progress float32, id uintptr) uint8 {
	r.mu.Lock()
	report := r.loads[id]
	r.mu.Unlock()
	if report == nil || report(float64(progress)) {
		return 1
	}
	return 0
}

// attach makes mp's load report to report until detach is called;
// report returning false stops the load.
func (r *progressRelay) attach(mp *llama.ModelParams, report func(float64) bool) (detach func()) {
	r.mu.Lock()
	r.next++
	id := r.next
	r.loads[id] = report
	r.mu.Unlock()
	mp.ProgressCallback, mp.ProgressCallbackUserData = r.fn, id
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.loads, id)
	}
}
