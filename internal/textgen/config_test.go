package textgen

import (
	"io"
	"testing"
	"time"

	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
)

func TestRegisterFlags(t *testing.T) {
	tests := []struct {
		name    string
		v       genq.Variant
		env     map[string]string
		args    []string
		want    Config
		wantErr bool
	}{
		{
			name: "variant A defaults: the context and the cap are sized at start",
			v:    genq.VariantA,
			want: Config{Temperature: 0.6, TopP: 0.9, TopK: 50, BatchSize: 512, SystemPrompt: DefaultSystemPrompt, GPU: true, GPUMemoryUtilization: 0.9, KVUnified: "auto", FlashAttention: "auto", DeviceSampling: "auto", PrefixCache: "on", TenantSteps: "auto", OtherProperties: "on", SchemaPrepareBudget: 25 * time.Millisecond},
		},
		{
			name: "variant B has the same defaults",
			v:    genq.VariantB,
			want: Config{Temperature: 0.6, TopP: 0.9, TopK: 50, BatchSize: 512, SystemPrompt: DefaultSystemPrompt, GPU: true, GPUMemoryUtilization: 0.9, KVUnified: "auto", FlashAttention: "auto", DeviceSampling: "auto", PrefixCache: "on", TenantSteps: "auto", OtherProperties: "on", SchemaPrepareBudget: 25 * time.Millisecond},
		},
		{
			name: "environment",
			v:    genq.VariantA,
			env:  map[string]string{"TEXT_CONTEXT_SIZE": "1024", "TEXT_MAX_NEW_TOKENS": "256", "TEXT_TEMPERATURE": "0", "TEXT_TOP_P": "0.5", "TEXT_SEED": "42", "TEXT_THREADS": "3", "TEXT_GPU": "false", "TEXT_PREFIX_CACHE": "off", "TEXT_TENANT_STEPS": "off"},
			want: Config{ContextSize: 1024, MaxNewTokens: 256, Temperature: 0, TopP: 0.5, TopK: 50, Seed: 42, Threads: 3, BatchSize: 512, SystemPrompt: DefaultSystemPrompt, GPUMemoryUtilization: 0.9, KVUnified: "auto", FlashAttention: "auto", DeviceSampling: "auto", PrefixCache: "off", TenantSteps: "off", OtherProperties: "on", SchemaPrepareBudget: 25 * time.Millisecond},
		},
		{
			name: "flag beats environment",
			v:    genq.VariantA,
			env:  map[string]string{"TEXT_TOP_K": "5"},
			args: []string{"-text-top-k", "7"},
			want: Config{Temperature: 0.6, TopP: 0.9, TopK: 7, BatchSize: 512, SystemPrompt: DefaultSystemPrompt, GPU: true, GPUMemoryUtilization: 0.9, KVUnified: "auto", FlashAttention: "auto", DeviceSampling: "auto", PrefixCache: "on", TenantSteps: "auto", OtherProperties: "on", SchemaPrepareBudget: 25 * time.Millisecond},
		},
		{
			name:    "bad number",
			v:       genq.VariantA,
			env:     map[string]string{"TEXT_TEMPERATURE": "hot"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := envflag.New("worker", func(k string) string { return tt.env[k] }, io.Discard)
			var c Config
			c.RegisterFlags(fs, tt.v)
			err := fs.Parse(tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse: %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && c != tt.want {
				t.Fatalf("got  %+v\nwant %+v", c, tt.want)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	// Slots and the context stay 0: Open sizes them once it knows the
	// model and the device; the answer's cap stays 0, what the context
	// leaves.
	if c.Slots != 0 || c.ContextSize != 0 || c.MaxNewTokens != 0 || c.BatchSize != 512 {
		t.Fatalf("defaults: %+v", c)
	}
	c, _ = Config{Slots: 300}.withDefaults()
	if c.BatchSize < 300 {
		t.Fatalf("batch %d cannot carry a token for each of 300 slots", c.BatchSize)
	}
	for _, bad := range []Config{
		{ContextSize: 256, MaxNewTokens: 256},
		{ContextSize: -1},
		{MaxNewTokens: -1},
		{TopK: -1},
		{KVUnified: "sometimes"},
		{FlashAttention: "maybe"},
		{PrefixCache: "yes"},
		{TenantSteps: "fair"},
		{Slots: -1},
		{GPUMemoryUtilization: 1.5},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("%+v: want an error", bad)
		}
	}
}
