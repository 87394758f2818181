package submit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/google/uuid"

	"github.com/genq/genq/internal/genq"
)

// Line is one line of a batch's input.
type Line struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Result is one line of a batch's results.jsonl.
type Result struct {
	ID            string    `json:"id"`
	Line          int       `json:"line"`
	GeneratedText *string   `json:"generated_text,omitempty"`
	File          string    `json:"file,omitempty"`
	Error         string    `json:"error,omitempty"`
	Code          genq.Code `json:"code,omitempty"`
}

// namespaceBatch derives job ids from the input, so a rerun of the same file
// gets the same ids: the queue drops its duplicates and the results store
// still holds what the first run finished.
var namespaceBatch = uuid.MustParse("6f1b4b8e-8f7e-4a53-9e57-3c1d7a3f0b2a")

// Read reads and checks a whole input of variant v's jobs before anything
// is queued. A bad line is returned as a failed result and the rest goes
// on; err is for an input that cannot be read at all.
func Read(r io.Reader, v genq.Variant) (lines []Line, bad []Result, err error) {
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		if len(raw) == 0 {
			continue
		}
		var l Line
		if err := json.Unmarshal(raw, &l); err != nil {
			bad = append(bad, badLine(l.ID, n, err.Error()))
			continue
		}
		if l.ID == "" {
			l.ID = uuid.NewSHA1(namespaceBatch, []byte(string(v)+"\x00"+strconv.Itoa(n)+"\x00"+l.Text)).String()
		}
		if err := (genq.Job{Envelope: genq.Envelope{ID: l.ID, Variant: v, Text: l.Text}}).Validate(); err != nil {
			bad = append(bad, badLine(l.ID, n, genq.ErrorMessage(err)))
			continue
		}
		if prev, dup := seen[l.ID]; dup {
			bad = append(bad, badLine(l.ID, n, fmt.Sprintf("id %q already used on line %d", l.ID, prev)))
			continue
		}
		seen[l.ID] = n
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return lines, bad, nil
}

// badLine is the result of a line that was never submitted. A line with no
// usable id is recorded under its line number.
func badLine(id string, n int, reason string) Result {
	if genq.ValidateJobID(id) != nil {
		id = "line-" + strconv.Itoa(n)
	}
	return Result{ID: id, Line: n, Error: reason, Code: genq.Invalid}
}
