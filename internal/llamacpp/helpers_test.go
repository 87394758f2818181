package llamacpp

import (
	"log/slog"
	"os"
	"testing"
)

// engineDir is the engine's build the tests load, from LLAMA_LIB_DIR; a
// test that needs it is skipped without it.
func engineDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(LibDirEnv)
	if dir == "" {
		t.Skip("LLAMA_LIB_DIR names no engine build")
	}
	return dir
}

// loadEngine loads the engine of engineDir.
func loadEngine(t *testing.T) *Library {
	t.Helper()
	lib, err := Load(engineDir(t), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}
