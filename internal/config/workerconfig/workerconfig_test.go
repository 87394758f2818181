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
	if c.WorkerID == "" || c.Runtime.WorkerID != c.WorkerID || c.Image.ModelDir != c.ModelDir {
		t.Fatalf("worker id %q (runtime %q), image model dir %q", c.WorkerID, c.Runtime.WorkerID, c.Image.ModelDir)
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
