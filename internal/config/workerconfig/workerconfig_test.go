package workerconfig

import (
	"io"
	"strings"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// TestDefaultsFromTheVariantAndTheImage: the variant (flag over variable)
// sets the slots' default; the model directory is /models in genq's images
// and models/<variant> elsewhere; a worker id is made when none is given;
// METRICS_ADDR= turns /metrics off.
func TestDefaultsFromTheVariantAndTheImage(t *testing.T) {
	c, err := Parse([]string{"--variant", "C"}, lookupOf(map[string]string{"VARIANT": "A", "METRICS_ADDR": ""}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Variant != genq.VariantC || c.Slots != genq.VariantC.Spec().Slots || c.ModelDir != "models/C" || c.MetricsAddr != "" {
		t.Fatalf("variant %s, slots %d, model dir %q, metrics %q", c.Variant, c.Slots, c.ModelDir, c.MetricsAddr)
	}
	if c.WorkerID == "" || c.Runtime.WorkerID != c.WorkerID || c.ONNX.ModelDir != c.ModelDir || c.GGML.ModelDir != c.ModelDir {
		t.Fatalf("worker id %q (runtime %q), image model dirs %q and %q", c.WorkerID, c.Runtime.WorkerID, c.ONNX.ModelDir, c.GGML.ModelDir)
	}
	// Both engines are given the one pipeline the IMAGE_* settings made.
	if c.Image.Width != 1024 || c.ONNX.Pipeline != c.Image || c.GGML.Pipeline != c.Image {
		t.Fatalf("pipelines %+v, %+v and %+v", c.Image, c.ONNX.Pipeline, c.GGML.Pipeline)
	}

	c, err = Parse(nil, lookupOf(map[string]string{"VARIANT": "B", "GENQ_IN_CONTAINER": "1", "WORKER_ID": "w7"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Variant != genq.VariantB || c.Slots != 0 || c.ModelDir != "/models" || c.WorkerID != "w7" || c.MetricsAddr != DefaultMetricsAddr {
		t.Fatalf("variant %s, slots %d, model dir %q, worker id %q, metrics %q", c.Variant, c.Slots, c.ModelDir, c.WorkerID, c.MetricsAddr)
	}

	// The queue's settings are the api's: the worker has no such flag.
	if _, err := Parse([]string{"--ack-wait", "3s"}, lookupOf(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "ack-wait") {
		t.Fatalf("--ack-wait: %v", err)
	}
}

// The ggml engine's own settings are parsed here and checked by the
// engine (ggmlimage's TestConfigValidate); the worker refuses only what
// the engine's choice decides.
func TestImageEngineSettings(t *testing.T) {
	c, err := Parse(nil, lookupOf(map[string]string{"VARIANT": "C", "IMAGE_BFLOAT16": "off", "IMAGE_BLAS": "on"}), io.Discard)
	if err != nil || c.GGML.BFloat16 != "off" || c.GGML.BLAS != "on" {
		t.Fatalf("got %q, %q, %v; want off, on", c.GGML.BFloat16, c.GGML.BLAS, err)
	}
	_, err = Parse(nil, lookupOf(map[string]string{"VARIANT": "C", "IMAGE_ENGINE": "onnx", "IMAGE_T5": "off"}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "IMAGE_T5") {
		t.Fatalf("IMAGE_T5=off with the ONNX engine: %v, want a refusal naming IMAGE_T5", err)
	}
}
