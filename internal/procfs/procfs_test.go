package procfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestField(t *testing.T) {
	path := filepath.Join(t.TempDir(), "info")
	if err := os.WriteFile(path, []byte("processor\t: 0\nmodel name\t: Some CPU  \nmodel name\t: second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"model name": "Some CPU", "processor": "0", "missing": ""} {
		if got := Field(path, key); got != want {
			t.Errorf("Field(%q) = %q, want %q", key, got, want)
		}
	}
	if got := Field(filepath.Join(t.TempDir(), "none"), "x"); got != "" {
		t.Errorf("Field of a missing file = %q", got)
	}
}

func TestPeakRSSMiB(t *testing.T) {
	if got := PeakRSSMiB(os.Getpid()); got <= 0 {
		t.Fatalf("PeakRSSMiB(self) = %v", got)
	}
	if got := PeakRSSMiB(-1); got != -1 {
		t.Fatalf("PeakRSSMiB of no process = %v, want -1", got)
	}
}
