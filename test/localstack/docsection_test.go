package localstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplaceSection(t *testing.T) {
	const begin, end = "<!-- x:begin -->", "<!-- x:end -->"
	tests := []struct {
		name, file, body, want, wantErr string
	}{
		{"replaces and keeps the text around", "# T\n\nintro\n" + begin + "\nold\n" + end + "\nafter\n", "new\n", "# T\n\nintro\n" + begin + "\nnew\n" + end + "\nafter\n", ""},
		{"an empty section", begin + end, "x\n", begin + "\nx\n" + end, ""},
		{"no markers", "# T\n", "x\n", "", "has no"},
		{"markers in the wrong order", end + begin, "x\n", "", "has no"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
				t.Fatal(err)
			}
			err := ReplaceSection(path, begin, end, tc.body)
			got, _ := os.ReadFile(path)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || string(got) != tc.file {
					t.Fatalf("err = %v, file %q; want an error with %q and the file untouched", err, got, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case string(got) != tc.want:
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
