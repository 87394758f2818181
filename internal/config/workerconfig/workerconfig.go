// Package workerconfig declares the worker's settings (cmd/worker): every
// flag and variable in one place, which cmd/worker parses and
// internal/config writes docs/configuration.md from.
package workerconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/diffusion"
	"github.com/genq/genq/internal/embedgen"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/ggmlimage"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/onnx"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tracing"
	"github.com/genq/genq/internal/worker"
)

// DefaultMetricsAddr is where a worker serves /metrics unless told otherwise.
const DefaultMetricsAddr = ":9091"

// TextGCPercent is a text worker's GOGC unless the environment sets one.
const TextGCPercent = 400

// Config is what the flags and the environment say.
type Config struct {
	Variant     genq.Variant
	ModelDir    string
	InContainer bool // GENQ_IN_CONTAINER: the default model directory is /models
	Slots       int
	WorkerID    string
	MetricsAddr string
	LogLevel    string
	GOGC        string // Go's own variable; declared here for the reference
	NATS        natsqueue.ConnectOptions
	Runtime     worker.Config
	Tracing     tracing.Config
	Models      catalog.Config
	Fleet       worker.FleetConfig
	// Catalog is what Models say, read at Parse.
	Catalog     *genq.Catalog
	Text        textgen.Config
	ImageEngine string // IMAGE_ENGINE: onnx or ggml
	// Image is the pipeline both image engines share; ONNX and GGML are
	// each engine's own settings, given Image by Parse.
	Image diffusion.Pipeline
	ONNX  onnx.Config
	GGML  ggmlimage.Config
	// Embedding is the settings of the catalogue's embedding models this
	// worker loads.
	Embedding embedgen.Config

	variant string // as given; Variant is parsed before Register
}

// Register declares the worker's settings on fs, binding them to c. The
// variant decides the defaults of some (slots, text context).
func (c *Config) Register(fs *envflag.Set, v genq.Variant) {
	fs.Section("General")
	fs.String(&c.variant, "variant", "VARIANT", "B", "variant served: A, B (text) or C (images)")
	fs.String(&c.LogLevel, "log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	fs.StringOff(&c.MetricsAddr, "metrics-addr", "METRICS_ADDR", DefaultMetricsAddr, "address of /metrics and /healthz (empty: off; when the default is taken, a free port)")

	fs.Section("Tracing")
	c.Tracing.RegisterFlags(fs, "genq-worker")

	fs.Section("Models")
	c.Models.RegisterFlags(fs)
	c.Fleet.RegisterFlags(fs)

	fs.Section("NATS connection")
	c.NATS.RegisterFlags(fs, "nats://127.0.0.1:4222")

	fs.Section("Worker")
	fs.String(&c.ModelDir, "model-dir", "MODEL_DIR", "", "directory of the model (default models/<variant>, or /models when GENQ_IN_CONTAINER=1)")
	fs.Bool(&c.InContainer, "", "GENQ_IN_CONTAINER", false, "set to 1 by genq's images: the default model directory is /models")
	defaultSlots := v.Spec().Slots
	if v.Kind() == genq.OutputText {
		// 0 lets the text backend size the batch from free GPU memory.
		defaultSlots = 0
	}
	fs.Int(&c.Slots, "slots", "SLOTS", defaultSlots, fmt.Sprintf(
		"jobs run at once; on a text variant they share one batch, and 0 sizes them from free GPU memory (TEXT_GPU_MEMORY_UTILIZATION), or runs %d (A) or %d (B) on a CPU",
		genq.VariantA.Spec().Slots, genq.VariantB.Spec().Slots))
	fs.String(&c.WorkerID, "worker-id", "WORKER_ID", "", "this worker's id in heartbeats and logs (default: the host name and 8 random characters)")
	fs.String(&c.GOGC, "", "GOGC", "", "Go's garbage collector target, in percent; unset, a text worker runs at "+strconv.Itoa(TextGCPercent)+" (docs/benchmarks.md, \"The text worker's GOGC\")")

	c.Runtime.RegisterFlags(fs)

	fs.Section("Text engine")
	c.Text.RegisterFlags(fs, v)

	fs.Section("Embedding engine")
	c.Embedding.RegisterFlags(fs)

	fs.Section("Image engine")
	c.Image.RegisterFlags(fs)
	c.ONNX.RegisterFlags(fs)
	for _, env := range []string{"IMAGE_MAX_SIZE", "IMAGE_MAX_STEPS"} {
		fs.Adopted(env, "the api takes it from the workers' heartbeats (the tightest live worker's), and refuses a request past it before queueing")
	}
	fs.String(&c.ImageEngine, "image-engine", "IMAGE_ENGINE", "ggml", "image engine: ggml (the ggml/*.gguf files, on the CPU or CUDA) or onnx (ONNX Runtime on the CPU, the ONNX export)")
	c.GGML.RegisterFlags(fs)
}

// Parse reads the worker's settings from args and the environment (lookup,
// as os.LookupEnv), writing --help to out.
func Parse(args []string, lookup func(string) (string, bool), out io.Writer) (Config, error) {
	var c Config
	// The variant decides defaults of other flags (slots, text context),
	// so it is read before the rest are declared.
	v, err := genq.ParseVariant(variantArg(args, lookup))
	if err != nil {
		return c, err
	}
	c.Variant = v
	fs := envflag.NewLookup("worker", lookup, out)
	c.Register(fs, v)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// Each engine checks its own settings when it opens; what is checked
	// here is which engine runs, and what only the choice can refuse.
	switch {
	case c.ImageEngine != "onnx" && c.ImageEngine != "ggml":
		return c, fmt.Errorf("image engine %q: want onnx or ggml", c.ImageEngine)
	case c.GGML.T5Off() && c.ImageEngine != "ggml":
		return c, errors.New("IMAGE_T5=off needs IMAGE_ENGINE=ggml: the ONNX engine always runs T5")
	}
	if c.Slots < 1 && (c.Slots < 0 || v.Kind() != genq.OutputText) {
		return c, errors.New("slots must be at least 1")
	}
	if c.ModelDir == "" {
		c.ModelDir = genq.DefaultModelDir(v, c.InContainer)
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = host + "-" + uuid.NewString()[:8]
	}
	c.Runtime.WorkerID, c.Runtime.Variant = c.WorkerID, v
	if c.Catalog, err = catalog.Load(c.Models, v, ""); err != nil {
		return c, err
	}
	c.Text.ModelDir, c.Text.Slots, c.Text.DefaultSlots = c.ModelDir, c.Slots, v.Spec().Slots
	c.ONNX.ModelDir, c.ONNX.Slots, c.ONNX.Pipeline = c.ModelDir, c.Slots, c.Image
	c.GGML.ModelDir, c.GGML.Slots, c.GGML.Pipeline = c.ModelDir, c.Slots, c.Image
	return c, nil
}

// variantArg finds --variant among the arguments, or VARIANT, or B.
func variantArg(args []string, lookup func(string) (string, bool)) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "variant" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	if v, _ := lookup("VARIANT"); v != "" {
		return v
	}
	return "B"
}
