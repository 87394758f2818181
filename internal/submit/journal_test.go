package submit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJournalCompactsAndFinds(t *testing.T) {
	text := func(s string) *string { return &s }
	tests := []struct {
		name     string
		earlier  string // results.jsonl left by an earlier run
		write    []Result
		files    []string // image files in place
		finished []string
		lines    int // after Close
	}{
		{name: "no earlier run", write: []Result{{ID: "a", GeneratedText: text("A")}}, finished: nil, lines: 1},
		{
			name:     "the last line of an id wins",
			earlier:  `{"id":"a","line":1,"error":"boom"}` + "\n" + `{"id":"b","line":2,"generated_text":"B"}` + "\n" + `{"id":"a","line":1,"generated_text":"A"}` + "\n",
			finished: []string{"a", "b"}, lines: 2,
		},
		{
			name:     "a torn line is dropped",
			earlier:  `{"id":"a","line":1,"generated_text":"A"}` + "\n" + `{"id":"b","li`,
			finished: []string{"a"}, lines: 1,
		},
		{
			name:     "a failure is not done",
			earlier:  `{"id":"a","line":1,"error":"boom","code":"internal"}` + "\n",
			write:    []Result{{ID: "a", Line: 1, GeneratedText: text("A")}},
			finished: nil, lines: 1,
		},
		{
			name:     "an image is done only with its file",
			earlier:  `{"id":"a","line":1,"file":"a.png"}` + "\n" + `{"id":"b","line":2,"file":"b.png"}` + "\n",
			files:    []string{"a.png"},
			finished: []string{"a"}, lines: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			if tt.earlier != "" {
				_ = os.MkdirAll(dir, 0o755)
				if err := os.WriteFile(filepath.Join(dir, ResultsFile), []byte(tt.earlier), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range tt.files {
				_ = os.WriteFile(filepath.Join(dir, f), []byte("png"), 0o644)
			}
			j, err := OpenJournal(dir)
			if err != nil {
				t.Fatal(err)
			}
			done, _, err := j.Outcomes()
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != len(tt.finished) {
				t.Errorf("finished = %v, want %v", done, tt.finished)
			}
			for _, id := range tt.finished {
				if !done[id] {
					t.Errorf("%s is not finished; finished = %v", id, done)
				}
			}
			for _, r := range tt.write {
				if err := j.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(j.Path())
			if err != nil && len(tt.write)+len(tt.earlier) > 0 {
				t.Fatal(err)
			}
			if n := strings.Count(string(b), "\n"); n != tt.lines {
				t.Errorf("results.jsonl has %d lines, want %d:\n%s", n, tt.lines, b)
			}
		})
	}
}
