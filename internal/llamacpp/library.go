// Package llamacpp adapts llama.cpp's C API (libllama and ggml), loaded at
// run time through github.com/hybridgroup/yzma, to what genq's text backend
// needs: a model and its vocabulary, a context with one KV-cache sequence
// per slot, batches, decoding and the logits it leaves.
//
// The binding is purego and libffi, not cgo: the Go build does not need the
// engine, and the engine's libraries come from one pinned llama.cpp build
// (scripts/build-llama.sh). A binding and a library of different versions
// would read each other's structs wrongly; Load refuses such a pair with
// one sentence before anything else is called.
package llamacpp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/hybridgroup/yzma/pkg/llama"
	"github.com/hybridgroup/yzma/pkg/loader"
	"github.com/hybridgroup/yzma/pkg/utils"
	"github.com/jupiterrider/ffi"
)

// Version is the llama.cpp release the binding (yzma, at go.mod's
// version) was written for; Load refuses any other. scripts/llama.env pins
// the sources the engine is built from, and TestPinnedRelease checks that
// they are this release.
const Version = "0.5.0"

// LibDirEnv names the directory of the engine's shared libraries.
const LibDirEnv = "LLAMA_LIB_DIR"

// StampFile is what scripts/build-llama.sh writes beside the libraries it
// built: which sources, flavour and flags they came from.
const StampFile = "genq-engine.json"

// Library is the loaded engine. There is one per process: the C libraries
// and yzma's function table are process-wide, which is why Load keeps it.
type Library struct {
	Dir     string
	Version string // llama_version()
	Stamp   Stamp  // from StampFile; zero when the directory has none
	// SystemInfo is llama_print_system_info(): the CPU features ggml uses.
	SystemInfo string

	progress *progressRelay // the loads' progress callback, one per process
}

// Stamp describes a build of the engine.
type Stamp struct {
	Tag     string `json:"tag"`
	Commit  string `json:"commit"`
	Flavour string `json:"flavour"`
}

var (
	loadOnce sync.Once
	loaded   *Library
	loadErr  error
	// logs forwards llama.cpp's log lines; set once, by the first Load.
	logs *logForwarder
)

// Load loads the engine's libraries from dir (LLAMA_LIB_DIR when empty,
// else lib/llama beside the binary or in the working folder), once per
// process, checks that they are the release the binding was
// written for, and routes llama.cpp's log lines to log. Later calls return
// the same library, or an error when they name another directory.
func Load(dir string, log *slog.Logger) (*Library, error) {
	if dir == "" {
		dir = os.Getenv(LibDirEnv)
	}
	if dir == "" {
		dir = findLibDir()
	}
	if dir == "" {
		return nil, fmt.Errorf("the engine's libraries are not found: set %s to the directory holding libllama.so (make engine builds it, linked at lib/llama)", LibDirEnv)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("the engine's libraries: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	loadOnce.Do(func() { loaded, loadErr = load(abs, log) })
	if loadErr != nil {
		return nil, loadErr
	}
	if loaded.Dir != abs {
		return nil, fmt.Errorf("the engine's libraries are already loaded from %s, not %s", loaded.Dir, abs)
	}
	return loaded, nil
}

// findLibDir is where make engine links the libraries (lib/llama) seen
// from a binary that was not told (LLAMA_LIB_DIR unset): beside the
// binary, one folder up from it (bin/worker in a checkout), or in the
// working folder; "" when none holds libllama.so.
func findLibDir() string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dirs = append(dirs, filepath.Join(filepath.Dir(exe), "lib", "llama"), filepath.Join(filepath.Dir(exe), "..", "lib", "llama"))
		}
	}
	dirs = append(dirs, filepath.Join("lib", "llama"))
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "libllama.so")); err == nil {
			return d
		}
	}
	return ""
}

func load(dir string, log *slog.Logger) (*Library, error) {
	if _, err := os.Stat(filepath.Join(dir, "libllama.so")); err != nil {
		return nil, fmt.Errorf("the engine's libraries are not in %s (%s): run make engine, or point %s at a build of llama.cpp %s", dir, firstLine(err), LibDirEnv, Version)
	}
	lib := &Library{Dir: dir}
	if b, err := os.ReadFile(filepath.Join(dir, StampFile)); err == nil {
		if err := json.Unmarshal(b, &lib.Stamp); err != nil {
			return nil, fmt.Errorf("the engine's libraries: %s in %s: %w", StampFile, dir, err)
		}
		if lib.Stamp.Tag != "" && strings.TrimPrefix(lib.Stamp.Tag, "v") != Version {
			return nil, fmt.Errorf("the engine's libraries in %s are llama.cpp %s; this genq is built for %s: rebuild them (make engine)", dir, lib.Stamp.Tag, Version)
		}
	}
	// Ask the library its version before yzma binds anything: a symbol the
	// binding expects and this release lacks would fail with a less useful
	// message.
	v, err := libraryVersion(dir)
	if err != nil {
		return nil, err
	}
	lib.Version = v
	if base, _, _ := strings.Cut(v, "-"); base != Version {
		return nil, fmt.Errorf("the engine's libraries: libllama in %s is llama.cpp %s; this genq's binding (%s) is for %s: rebuild them (make engine)", dir, v, bindingName(), Version)
	}
	if err := llama.Load(dir); err != nil {
		return nil, fmt.Errorf("the engine's libraries: bind libllama in %s: %w", dir, err)
	}
	if err := checkLayout(); err != nil {
		return nil, fmt.Errorf("the engine's libraries: libllama in %s: %w", dir, err)
	}
	logs = newLogForwarder(log)
	llama.LogSet(logs.callback)
	lib.progress = newProgressRelay()
	// Builds with backends as loadable modules (the portable CPU build, a
	// CUDA build) register them from the directory; others link them in.
	if err := llama.GGMLBackendLoadAllFromPath(dir); err != nil {
		return nil, fmt.Errorf("the engine's libraries: load ggml's backends from %s: %w", dir, err)
	}
	llama.BackendInit()
	lib.SystemInfo = strings.TrimSpace(llama.PrintSystemInfo())
	return lib, nil
}

// bindingName is the binding and its version as this binary was built
// with it (go.mod's), so that no message writes the version again.
func bindingName() string {
	const path = "github.com/hybridgroup/yzma"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return "yzma " + m.Version
			}
		}
	}
	return "yzma"
}

// SetOpenMPSpin sets how many times one of ggml's OpenMP threads polls at
// a barrier before it sleeps (libgomp's GOMP_SPINCOUNT), for the whole
// process. libgomp reads it once, when it is loaded, so the engine's
// libraries must not be loaded yet.
func SetOpenMPSpin(count int) error {
	return setOpenMPSpin(loaded != nil, count, os.Setenv)
}

// setOpenMPSpin is SetOpenMPSpin with the library's state and the
// environment passed in.
func setOpenMPSpin(libLoaded bool, count int, setenv func(key, value string) error) error {
	if libLoaded {
		return errors.New("GOMP_SPINCOUNT: the engine's libraries are already loaded, and libgomp has read its settings")
	}
	if count < 0 {
		return fmt.Errorf("GOMP_SPINCOUNT: %d polls: want 0 or more", count)
	}
	if err := setenv("GOMP_SPINCOUNT", strconv.Itoa(count)); err != nil {
		return fmt.Errorf("set GOMP_SPINCOUNT: %w", err)
	}
	return nil
}

// libraryVersion calls llama_version(), which yzma does not bind.
func libraryVersion(dir string) (string, error) {
	l, err := loader.LoadLibrary(dir, "llama")
	if err != nil {
		return "", fmt.Errorf("the engine's libraries: open libllama in %s: %s", dir, firstLine(err))
	}
	fn, err := l.Prep("llama_version", &ffi.TypePointer)
	if err != nil {
		return "", fmt.Errorf("the engine's libraries: libllama in %s has no llama_version: it is older than llama.cpp %s, which this genq needs", dir, Version)
	}
	var p *byte
	fn.Call(unsafe.Pointer(&p))
	if p == nil {
		return "", errors.New("the engine's libraries: llama_version returned nothing")
	}
	return utils.BytePtrToString(p), nil
}

// checkLayout reads the library's default parameters through the binding's
// structs and checks that every field lands where the C struct has it: a
// field added or removed upstream shifts the others, and the defaults then
// read as nonsense (yzma's own layout test, at start-up).
func checkLayout() error {
	c := llama.ContextDefaultParams()
	bad := func(what string, v any) error {
		return fmt.Errorf("the binding reads llama_context_params.%s as %v: the library and the binding disagree on the struct's layout; rebuild the engine at the pinned release", what, v)
	}
	switch {
	case c.NCtx == 0 || c.NCtx > 1<<22:
		return bad("n_ctx", c.NCtx)
	case c.NBatch == 0 || c.NBatch > 1<<22:
		return bad("n_batch", c.NBatch)
	case c.NSeqMax == 0 || c.NSeqMax > 1<<16:
		return bad("n_seq_max", c.NSeqMax)
	case c.FlashAttentionType < llama.FlashAttentionTypeAuto || c.FlashAttentionType > llama.FlashAttentionTypeEnabled:
		return bad("flash_attn_type", c.FlashAttentionType)
	case c.PoolingType < llama.PoolingTypeUnspecified || c.PoolingType > llama.PoolingTypeRank:
		return bad("pooling_type", c.PoolingType)
	case c.Offload_kqv > 1 || c.NoPerf > 1 || c.OpOffload > 1 || c.SwaFull > 1 || c.KVUnified > 1 || c.Embeddings > 1:
		return bad("bools", []uint8{c.Embeddings, c.Offload_kqv, c.NoPerf, c.OpOffload, c.SwaFull, c.KVUnified})
	}
	m := llama.ModelDefaultParams()
	switch {
	case m.Devices != 0 || m.TensorBuftOverrides != 0 || m.KvOverrides != 0:
		return fmt.Errorf("the binding reads llama_model_params' pointers as set by default: the library and the binding disagree on the struct's layout; rebuild the engine at the pinned release")
	case m.VocabOnly > 1 || m.CheckTensors > 1 || m.UseExtraBufts > 1 || m.NoHost > 1 || m.NoAlloc > 1:
		return fmt.Errorf("the binding reads llama_model_params' bools as %v: the library and the binding disagree on the struct's layout; rebuild the engine at the pinned release",
			[]uint8{m.VocabOnly, m.CheckTensors, m.UseExtraBufts, m.NoHost, m.NoAlloc})
	}
	return nil
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// logForwarder turns llama.cpp's log callbacks into slog records. The
// engine writes a line in pieces (a level, then continuations), so pieces
// are joined until a newline. Warnings and errors also stay in a short
// ring, so that a failed call can say why in its error (LastErrors).
type logForwarder struct {
	log      *slog.Logger
	callback uintptr

	mu      sync.Mutex
	partial strings.Builder
	level   slog.Level
	recent  []string
}

// ggml's log levels (ggml.h).
const (
	ggmlLogNone = iota
	ggmlLogDebug
	ggmlLogInfo
	ggmlLogWarn
	ggmlLogError
	ggmlLogCont
)

func newLogForwarder(log *slog.Logger) *logForwarder {
	f := &logForwarder{log: log}
	// One callback for the process: purego keeps a fixed number of them.
	f.callback = purego.NewCallback(func(level int32, text *byte, _ uintptr) uintptr {
		f.write(level, utils.BytePtrToString(text))
		return 0
	})
	return f
}

func (f *logForwarder) write(level int32, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if level != ggmlLogCont {
		switch level {
		case ggmlLogError:
			f.level = slog.LevelError
		case ggmlLogWarn:
			f.level = slog.LevelWarn
		case ggmlLogInfo:
			// llama.cpp's info lines are a load's dozens of details:
			// debug for genq, whose own lines say what was loaded.
			f.level = slog.LevelDebug
		default:
			f.level = slog.LevelDebug - 4
		}
	}
	f.partial.WriteString(text)
	s := f.partial.String()
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok {
			break
		}
		if line = strings.TrimSpace(line); line != "" {
			f.log.Log(context.Background(), f.level, "llama.cpp: "+line)
			if f.level >= slog.LevelWarn {
				f.recent = append(f.recent, line)
				if len(f.recent) > 8 {
					f.recent = f.recent[len(f.recent)-8:]
				}
			}
		}
		s = rest
	}
	f.partial.Reset()
	f.partial.WriteString(s)
}

// takeErrors returns the warnings and errors logged since the last call,
// and forgets them.
func (f *logForwarder) takeErrors() []string {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.recent
	f.recent = nil
	return out
}

// engineSaid appends what the engine logged as warnings and errors to a
// failure, which llama.cpp reports only as a NULL or an error code.
func engineSaid(err error) error {
	lines := logs.takeErrors()
	if len(lines) == 0 {
		return err
	}
	return fmt.Errorf("%w (llama.cpp: %s)", err, strings.Join(lines, "; "))
}
