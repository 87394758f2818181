package embedgen

import "testing"

// EMBEDDING_STEP_TOKENS resolves by device, and never past
// EMBEDDING_BATCH_TOKENS.
func TestStepTokens(t *testing.T) {
	tests := []struct {
		name       string
		step, max  int
		gpu        bool
		wantTokens int
	}{
		{"the CPU's default", 0, 4096, false, DefaultCPUStepTokens},
		{"a GPU's default", 0, 4096, true, 4096},
		{"set", 300, 4096, false, 300},
		{"set on a GPU", 300, 4096, true, 300},
		{"past the batch", 8192, 4096, false, 4096},
		{"the CPU's default past a small batch", 0, 256, false, 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Config{StepTokens: tt.step, BatchTokens: tt.max}).stepTokens(tt.gpu); got != tt.wantTokens {
				t.Errorf("stepTokens = %d, want %d", got, tt.wantTokens)
			}
		})
	}
	if _, err := (Config{StepTokens: -1}).withDefaults(); err == nil {
		t.Error("EMBEDDING_STEP_TOKENS=-1 was accepted")
	}
	if _, err := (Config{SpinCount: -2}).withDefaults(); err == nil {
		t.Error("EMBEDDING_SPIN_COUNT=-2 was accepted")
	}
}
