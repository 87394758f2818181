package submit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

func TestRetryIDFitsTheLimit(t *testing.T) {
	for _, n := range []int{1, 100, genq.MaxJobIDLen} {
		id := retryID(strings.Repeat("a", n))
		if err := genq.ValidateJobID(id); err != nil {
			t.Errorf("retry id of a %d-character id: %v", n, err)
		}
	}
}

// fakeQueue answers FetchResult from stored, and runs a job by upper-casing
// its text, or fails it when its text is "fail".
type fakeQueue struct {
	stored map[string]error // FetchResult's error per id; nil: a stored "STORED"

	mu         sync.Mutex
	ran        []string
	uncanceled []string
}

func body(s string) *genq.ReceivedResult {
	r := genq.NewTextResult(s)
	return &genq.ReceivedResult{ContentType: r.ContentType, Body: io.NopCloser(bytes.NewReader(r.Data))}
}

func (q *fakeQueue) FetchResult(_ context.Context, id string) (*genq.ReceivedResult, error) {
	if err, ok := q.stored[id]; ok {
		if err != nil {
			return nil, err
		}
		return body("STORED"), nil
	}
	return nil, genq.Errorf(genq.NotFound, "no result for %s", id)
}

func (q *fakeQueue) Uncancel(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.uncanceled = append(q.uncanceled, id)
	return nil
}

func (q *fakeQueue) Run(_ context.Context, job genq.Job) (*genq.ReceivedResult, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ran = append(q.ran, job.ID)
	if job.Text == "fail" {
		return nil, genq.Errorf(genq.Invalid, "refused")
	}
	if job.Text == "unavailable once" && len(q.ran) == 1 {
		return nil, genq.Errorf(genq.Unavailable, "the queue did not accept the job in time")
	}
	return body(strings.ToUpper(job.Text)), nil
}

func TestRunner(t *testing.T) {
	tests := []struct {
		name    string
		lines   []Line
		bad     []Result
		done    map[string]bool
		failed  map[string]bool
		stored  map[string]error
		errIn   string
		ran     []string // ids run; "a-retry" for a retry id of a
		results map[string]string
	}{
		{
			name:  "every line runs under its id once its cancel is withdrawn",
			lines: []Line{{ID: "a", Text: "x"}, {ID: "b", Text: "y"}},
			ran:   []string{"a", "b"}, results: map[string]string{"a": "X", "b": "Y"},
		},
		{
			name:  "done lines are skipped",
			lines: []Line{{ID: "a", Text: "x"}, {ID: "b", Text: "y"}}, done: map[string]bool{"a": true},
			ran: []string{"b"}, results: map[string]string{"b": "Y"},
		},
		{
			name:  "a stored result is collected without running",
			lines: []Line{{ID: "a", Text: "x"}}, stored: map[string]error{"a": nil},
			results: map[string]string{"a": "STORED"},
		},
		{
			name:  "a job that failed before runs again under a fresh id",
			lines: []Line{{ID: "a", Text: "x"}}, stored: map[string]error{"a": genq.Errorf(genq.Internal, "boom")},
			ran: []string{"a-retry"}, results: map[string]string{"a": "X"},
		},
		{
			name:  "a job the journal records as failed runs under a fresh id, its failure not yet stored",
			lines: []Line{{ID: "a", Text: "x"}}, failed: map[string]bool{"a": true},
			ran: []string{"a-retry"}, results: map[string]string{"a": "X"},
		},
		{
			name:  "a failure is recorded and fails the batch",
			lines: []Line{{ID: "a", Text: "fail"}, {ID: "b", Text: "y"}},
			errIn: "1 of 2 jobs failed", ran: []string{"a", "b"}, results: map[string]string{"a": "error: refused", "b": "Y"},
		},
		{
			name:  "a job the queue did not take in time runs again under a fresh id",
			lines: []Line{{ID: "a", Text: "unavailable once"}},
			ran:   []string{"a", "a-retry"}, results: map[string]string{"a": "UNAVAILABLE ONCE"},
		},
		{
			name:  "bad lines are recorded as failed",
			lines: []Line{{ID: "a", Text: "x"}}, bad: []Result{{ID: "line-2", Line: 2, Error: "bad json", Code: genq.Invalid}},
			errIn: "1 of 2 jobs failed", ran: []string{"a"}, results: map[string]string{"a": "X", "line-2": "error: bad json"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &fakeQueue{stored: tt.stored}
			j, err := OpenJournal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			r := NewRunner(Config{Variant: genq.VariantB, Concurrency: 2, Timeout: time.Minute}, q, q, j)
			var progress bytes.Buffer
			err = r.Run(t.Context(), tt.lines, tt.bad, tt.done, tt.failed, &progress)
			if tt.errIn == "" && err != nil || tt.errIn != "" && (err == nil || !strings.Contains(err.Error(), tt.errIn)) {
				t.Fatalf("err = %v, want one holding %q", err, tt.errIn)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			ran := map[string]bool{}
			for _, id := range q.ran {
				if i := strings.Index(id, "-retry-"); i > 0 {
					id = id[:i] + "-retry"
				}
				ran[id] = true
			}
			if len(ran) != len(tt.ran) {
				t.Errorf("ran %v, want %v", q.ran, tt.ran)
			}
			for _, id := range tt.ran {
				if !ran[id] {
					t.Errorf("%s did not run; ran %v", id, q.ran)
				}
			}
			got := readJournal(t, j)
			if len(got) != len(tt.results) {
				t.Errorf("results %v, want %v", got, tt.results)
			}
			for id, want := range tt.results {
				if got[id] != want {
					t.Errorf("result of %s = %q, want %q", id, got[id], want)
				}
			}
		})
	}
}

// readJournal reads each id's generated text, or "error: " and its error.
func readJournal(t *testing.T, j *Journal) map[string]string {
	t.Helper()
	b, err := os.ReadFile(j.Path())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var lines []Result
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		lines = append(lines, r)
	}
	for _, r := range lines {
		switch {
		case r.Error != "":
			got[r.ID] = "error: " + r.Error
		case r.GeneratedText != nil:
			got[r.ID] = *r.GeneratedText
		}
	}
	return got
}
