package onnx

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// ortLibrary finds ONNX Runtime for tests: ONNXRUNTIME_LIB, else the
// repository's lib/onnxruntime. Without it the test is skipped, unless
// GENQ_REQUIRE_ORT=1 (make test), where a missing library is a failure.
func ortLibrary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("ONNXRUNTIME_LIB"); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("ONNXRUNTIME_LIB: %v", err)
		}
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", DefaultLibraryPath)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if os.Getenv("GENQ_REQUIRE_ORT") == "1" {
		tb.Fatalf("ONNX Runtime not found at %s and ONNXRUNTIME_LIB is unset; run scripts/fetch-onnxruntime.sh lib/onnxruntime", p)
	}
	tb.Skipf("ONNX Runtime not found at %s (set ONNXRUNTIME_LIB or run scripts/fetch-onnxruntime.sh lib/onnxruntime)", p)
	return ""
}
