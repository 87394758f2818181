package submit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ResultsFile is the JSON-lines record of a batch, in its output directory.
const ResultsFile = "results.jsonl"

// Journal is a batch's results.jsonl: what a rerun of the batch reads to
// skip the jobs already done. Lines are appended as results arrive, one
// write per line, and compacted to one line per id, the last, when the
// journal is opened and closed.
type Journal struct {
	dir string

	mu sync.Mutex
	f  *os.File // opened on the first write
}

// OpenJournal creates the output directory dir if need be and compacts the
// journal an earlier run left there.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output directory: %w", err)
	}
	if err := compact(filepath.Join(dir, ResultsFile)); err != nil {
		return nil, err
	}
	return &Journal{dir: dir}, nil
}

// Path is where the journal is.
func (j *Journal) Path() string { return filepath.Join(j.dir, ResultsFile) }

// Outcomes lists the ids that the journal records as done (with no
// error, and with their file, if they have one, in place), and those whose
// last line records a failure: their own id has run, and failed.
func (j *Journal) Outcomes() (done, failed map[string]bool, err error) {
	done, failed = map[string]bool{}, map[string]bool{}
	f, err := os.Open(j.Path())
	if errors.Is(err, os.ErrNotExist) {
		return done, failed, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r Result
		// A torn last line from an interrupted run is simply not done.
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		failed[r.ID] = r.Error != ""
		if r.Error == "" && (r.File == "" || fileExists(filepath.Join(j.dir, r.File))) {
			done[r.ID] = true
		}
	}
	for id, f := range failed {
		if !f || done[id] {
			delete(failed, id)
		}
	}
	return done, failed, sc.Err()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Write appends a result line.
func (j *Journal) Write(res Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		f, err := os.OpenFile(j.Path(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		j.f = f
	}
	_, err = j.f.Write(append(b, '\n'))
	return err
}

// Close closes the journal and compacts it: a rerun appends the new
// outcome of a job that failed before.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	return compact(j.Path())
}

// compact rewrites the journal at path with one line per id, the last
// written; torn lines are dropped.
func compact(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var order []string
	last := map[string][]byte{}
	for _, line := range bytes.Split(data, []byte("\n")) {
		var r Result
		if json.Unmarshal(line, &r) != nil || r.ID == "" {
			continue
		}
		if _, ok := last[r.ID]; !ok {
			order = append(order, r.ID)
		}
		last[r.ID] = line
	}
	var out bytes.Buffer
	for _, id := range order {
		out.Write(last[id])
		out.WriteByte('\n')
	}
	if bytes.Equal(out.Bytes(), data) {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
