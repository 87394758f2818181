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

// IMAGE_BFLOAT16 is auto unless set, takes on and off, and refuses
// anything else by name.
func TestImageBFloat16(t *testing.T) {
	for _, tc := range []struct {
		env     map[string]string
		want    string
		refused bool
	}{
		{map[string]string{"VARIANT": "C"}, "auto", false},
		{map[string]string{"VARIANT": "C", "IMAGE_BFLOAT16": "off"}, "off", false},
		{map[string]string{"VARIANT": "C", "IMAGE_BFLOAT16": "on"}, "on", false},
		{map[string]string{"VARIANT": "C", "IMAGE_BFLOAT16": "yes"}, "", true},
	} {
		c, err := Parse(nil, lookupOf(tc.env), io.Discard)
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "IMAGE_BFLOAT16")):
			t.Errorf("%v: got %v, want an error naming IMAGE_BFLOAT16", tc.env, err)
		case !tc.refused && (err != nil || c.ImageBFloat16 != tc.want):
			t.Errorf("%v: got %q, %v; want %q", tc.env, c.ImageBFloat16, err, tc.want)
		}
	}
}
