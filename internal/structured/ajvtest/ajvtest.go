// Package ajvtest validates JSON answers against their schemas with ajv
// (test/structured), a validator written independently of genq's schema
// compiler, for the tests of constrained decoding.
package ajvtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Line is one schema and the answers to check against it.
type Line struct {
	Schema  json.RawMessage `json:"schema"`
	Answers []string        `json:"answers"`
	// AssertFormats makes format assert whatever the schema's draft
	// says, as genq's strict schemas have it.
	AssertFormats bool `json:"assertFormats,omitempty"`
}

// Check validates every line's answers and returns, per line and answer,
// "" for a valid one or ajv's complaint. It reports false when node or
// the package is missing, which fails the test under GENQ_REQUIRE_AJV=1
// (make test installs it).
func Check(t testing.TB, lines []Line) ([][]string, bool) {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(self), "..", "..", "..", "test", "structured")
	missing := func(what string, err error) ([][]string, bool) {
		if os.Getenv("GENQ_REQUIRE_AJV") == "1" {
			t.Fatalf("ajv cannot run (%s: %v); npm ci in test/structured installs it", what, err)
		}
		return nil, false
	}
	if _, err := exec.LookPath("node"); err != nil {
		return missing("node", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ajv")); err != nil {
		return missing("ajv", err)
	}
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("node", "validate.mjs")
	cmd.Dir = dir
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ajv: %v: %s", err, stderr.String())
	}
	var errs [][]string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var r struct {
			CompileError string `json:"compileError"`
			Results      []struct {
				OK    bool   `json:"ok"`
				Error string `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		var e []string
		if r.CompileError != "" {
			e = append(e, "ajv cannot compile the schema: "+r.CompileError)
		}
		for _, res := range r.Results {
			if !res.OK {
				e = append(e, res.Error)
			} else {
				e = append(e, "")
			}
		}
		errs = append(errs, e)
	}
	if len(errs) != len(lines) {
		t.Fatalf("ajv answered %d lines for %d", len(errs), len(lines))
	}
	return errs, true
}
