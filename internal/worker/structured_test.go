package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// openTinyText opens the tiny random-weight text model of the tests'
// variant.
func openTinyText(t *testing.T) *textgen.Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), tinygguf.FileName(variant, "tiny"))
	if err := tinygguf.Write(path, tinygguf.OptionsFor(variant, "tiny", 1)); err != nil {
		t.Fatal(err)
	}
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: path, Slots: 2, Threads: 1, ContextSize: 2048}, testLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestStructuredJobsStraightOntoNATS: a job published onto NATS without
// the api's checks is checked again by the worker's model. A schema it
// cannot enforce ends as invalid after one run, never retried nor
// dead-lettered; a good one is answered, tool calls and all.
func TestStructuredJobsStraightOntoNATS(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	model := openTinyText(t)
	b := newScripted(func(ctx context.Context, job genq.Job, _ int) (genq.Result, error) {
		return model.Generate(ctx, job, nil)
	})
	h.startWorker("w1", b, time.Second)
	tool := genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "now",
		Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}}
	chat := func(shape func(*genq.Job)) genq.Job {
		job := newJob("", time.Now().Add(time.Minute))
		job.Messages = []genq.Message{{Role: genq.RoleUser, Content: "What time is it?"}}
		shape(&job)
		return job
	}
	tests := []struct {
		name        string
		job         genq.Job
		wantMessage string // of the invalid outcome; "" for an answer
	}{
		{"a malformed schema", chat(func(j *genq.Job) {
			j.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema,
				JSONSchema: &genq.JSONSchema{Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"strin"}}}`)}}
		}), "strin"},
		{"an unsatisfiable schema", chat(func(j *genq.Job) {
			j.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema,
				JSONSchema: &genq.JSONSchema{Name: "x", Schema: json.RawMessage(`{"enum":[]}`)}}
		}), "enum"},
		{"a tool call", chat(func(j *genq.Job) {
			j.Tools, j.ToolChoice = []genq.Tool{tool}, &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
		}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := h.run(tt.job)
			if tt.wantMessage != "" {
				if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), tt.wantMessage) {
					t.Fatalf("Run: %v; want invalid, naming %q", err, tt.wantMessage)
				}
				if n := b.callsOf(tt.job.ID); n != 1 {
					t.Errorf("the model ran the job %d times, want once", n)
				}
				if h.deadLetter(tt.job.ID) != nil {
					t.Error("an invalid job was dead-lettered")
				}
				return
			}
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			body, _ := io.ReadAll(a.Body)
			var res genq.TextResult
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if res.FinishReason != genq.FinishToolCalls || len(res.ToolCalls) != 1 || res.ToolCalls[0].Function.Name != "now" {
				t.Fatalf("answer %s: want one call of now, finish tool_calls", body)
			}
		})
	}
}
