package ggmlimage

import (
	"strings"
	"testing"

	"github.com/genq/genq/internal/diffusion"
)

// The engine checks its own settings, once, naming the setting refused.
func TestConfigValidate(t *testing.T) {
	ok := Config{ModelDir: "m", Pipeline: diffusion.Pipeline{}.WithDefaults()}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		names string // "" when valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"bfloat16 off", func(c *Config) { c.BFloat16 = BFloat16Off }, ""},
		{"bfloat16 yes", func(c *Config) { c.BFloat16 = "yes" }, "IMAGE_BFLOAT16"},
		{"blas on", func(c *Config) { c.BLAS = "on" }, ""},
		{"blas maybe", func(c *Config) { c.BLAS = "maybe" }, "IMAGE_BLAS"},
		{"t5 off", func(c *Config) { c.t5 = "off" }, ""},
		{"t5 none", func(c *Config) { c.t5 = "none" }, "IMAGE_T5"},
		{"size 1000", func(c *Config) { c.Width = 1000 }, "multiples of 16"},
		{"device tpu", func(c *Config) { c.Device = "tpu" }, "image device"},
		{"no model", func(c *Config) { c.ModelDir = "" }, "model directory"},
	} {
		c := ok
		tc.edit(&c)
		err := c.validate()
		switch {
		case tc.names == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.names != "" && (err == nil || !strings.Contains(err.Error(), tc.names)):
			t.Errorf("%s: %v, want a refusal naming %s", tc.name, err, tc.names)
		}
	}
}
