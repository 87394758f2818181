package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/genq/genq/internal/genq"
)

// The Files and Batch APIs' shapes: a file, a batch, the lines of a batch's
// input file and of its output and error files.

// File is a file object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt *int64 `json:"expires_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	Status    string `json:"status"`
}

// FileOf is a stored file as the API gives it.
func FileOf(f genq.StoredFile, ttl int64) File {
	var expires *int64
	if ttl > 0 {
		e := f.CreatedAt + ttl
		expires = &e
	}
	return File{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt, ExpiresAt: expires,
		Filename: f.Filename, Purpose: f.Purpose, Status: "processed"}
}

// File purposes genq takes and writes.
const (
	PurposeBatch       = "batch"
	PurposeBatchOutput = "batch_output"
)

// Batch statuses, as OpenAI's.
const (
	BatchValidating = "validating"
	BatchFailed     = "failed"
	BatchInProgress = "in_progress"
	BatchFinalizing = "finalizing"
	BatchCompleted  = "completed"
	BatchExpired    = "expired"
	BatchCancelling = "cancelling"
	BatchCancelled  = "cancelled"
)

// Batch is a batch object.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *BatchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    BatchCounts       `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

// Ended tells a batch that will not change again.
func (b Batch) Ended() bool {
	switch b.Status {
	case BatchFailed, BatchCompleted, BatchExpired, BatchCancelled:
		return true
	}
	return false
}

// BatchCounts are a batch's requests: all, done, failed.
type BatchCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// BatchErrors are why a batch failed its validation.
type BatchErrors struct {
	Object string       `json:"object"`
	Data   []BatchError `json:"data"`
}

// BatchError is one reason, at one line (1-based) when it is a line's.
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// BatchCreate is POST /v1/batches' body. Webhook is genq's own: a URL the
// batch's end is sent to, signed as asynchronous jobs' webhooks are.
type BatchCreate struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
	Webhook          string            `json:"webhook"`
}

// Batch endpoints genq runs.
var BatchEndpoints = []string{"/v1/chat/completions", "/v1/completions", "/v1/responses", EmbeddingsEndpoint}

// EmbeddingsEndpoint is the embeddings route, in a batch as on its own.
const EmbeddingsEndpoint = "/v1/embeddings"

// Check refuses a create request genq cannot run.
func (c BatchCreate) Check() error {
	switch {
	case c.InputFileID == "":
		return genq.Errorf(genq.Invalid, "input_file_id is required")
	case !slices.Contains(BatchEndpoints, c.Endpoint):
		return genq.Errorf(genq.Invalid, "endpoint %q is not one genq runs in a batch: %s", c.Endpoint, strings.Join(BatchEndpoints, ", "))
	case c.CompletionWindow != "24h":
		return genq.Errorf(genq.Invalid, "completion_window must be \"24h\", not %q", c.CompletionWindow)
	case len(c.Metadata) > 16:
		return genq.Errorf(genq.Invalid, "metadata holds at most 16 pairs, not %d", len(c.Metadata))
	}
	for k, v := range c.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return genq.Errorf(genq.Invalid, "metadata keys are at most 64 characters and values at most 512")
		}
	}
	return nil
}

// BatchLine is one request of a batch's input file.
type BatchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// MaxBatchLines bounds a batch's requests, as OpenAI's do.
const MaxBatchLines = 50_000

// ParseBatchInput reads a batch's input file: one JSON object per line,
// each {"custom_id", "method": "POST", "url", "body"}, custom_id unique,
// url the batch's endpoint. decode checks a line's body as its route would
// (nil: not checked). Every bad line is an error naming it, up to a few.
func ParseBatchInput(data []byte, endpoint string, decode func(body []byte) error) ([]BatchLine, []BatchError) {
	var lines []BatchLine
	var errs []BatchError
	bad := func(n int, code, format string, args ...any) {
		if len(errs) < 20 {
			line := n
			errs = append(errs, BatchError{Code: code, Message: fmt.Sprintf(format, args...), Line: &line})
		}
	}
	seen := map[string]int{}
	n := 0
	for raw := range bytes.SplitSeq(data, []byte("\n")) {
		n++
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		var l BatchLine
		if err := json.Unmarshal(raw, &l); err != nil {
			bad(n, "invalid_json_line", "line %d is not a JSON object: %v", n, err)
			continue
		}
		switch {
		case l.CustomID == "":
			bad(n, "missing_custom_id", "line %d has no custom_id", n)
		case seen[l.CustomID] > 0:
			bad(n, "duplicate_custom_id", "line %d: custom_id %q is the same as line %d's; each must be unique", n, l.CustomID, seen[l.CustomID])
		case l.Method != "POST":
			bad(n, "invalid_method", "line %d: method must be \"POST\", not %q", n, l.Method)
		case l.URL != endpoint:
			bad(n, "mismatched_endpoint", "line %d: url %q is not the batch's endpoint %q", n, l.URL, endpoint)
		case len(l.Body) == 0 || l.Body[0] != '{':
			bad(n, "invalid_body", "line %d: body must be a JSON object", n)
		default:
			if decode != nil {
				if err := decode(l.Body); err != nil {
					bad(n, "invalid_request", "line %d: %s", n, genq.ErrorMessage(err))
					continue
				}
			}
			seen[l.CustomID] = n
			lines = append(lines, l)
			continue
		}
		if l.CustomID != "" && seen[l.CustomID] == 0 {
			seen[l.CustomID] = n
		}
	}
	switch {
	case len(errs) == 0 && len(lines) == 0:
		errs = append(errs, BatchError{Code: "empty_file", Message: "the input file holds no request"})
	case len(lines) > MaxBatchLines:
		errs = append(errs, BatchError{Code: "too_many_requests", Message: fmt.Sprintf("the input file holds %d requests; a batch takes at most %d", len(lines), MaxBatchLines)})
	}
	return lines, errs
}

// BatchOutputLine is one line of a batch's output or error file.
type BatchOutputLine struct {
	ID       string               `json:"id"`
	CustomID string               `json:"custom_id"`
	Response *BatchOutputResponse `json:"response"`
	Error    *Error               `json:"error"`
}

// BatchOutputResponse is a line's answer as its route would give it.
type BatchOutputResponse struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

// List is a page of a list route.
type List[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}
