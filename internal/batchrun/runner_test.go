package batchrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// memStore is a Store in memory, with the revisions of a KV bucket.
type memStore struct {
	mu      sync.Mutex
	files   map[string][]byte
	records map[string][]byte
	revs    map[string]uint64
	lines   map[string][]byte
}

func newMemStore() *memStore {
	return &memStore{files: map[string][]byte{}, records: map[string][]byte{}, revs: map[string]uint64{}, lines: map[string][]byte{}}
}

func (m *memStore) PutFile(_ context.Context, f genq.StoredFile, data io.Reader) (genq.StoredFile, error) {
	b, err := io.ReadAll(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[f.ID] = b
	return f, err
}

func (m *memStore) FileData(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.files[id]
	if !ok {
		return nil, genq.Errorf(genq.NotFound, "no file %s", id)
	}
	return b, nil
}

func (m *memStore) PutBatch(_ context.Context, id string, record []byte, revision uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.revs[id] != revision {
		return 0, genq.ErrChanged
	}
	m.revs[id]++
	m.records[id] = record
	return m.revs[id], nil
}

func (m *memStore) Batch(_ context.Context, id string) ([]byte, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.records[id]
	if !ok {
		return nil, 0, genq.Errorf(genq.NotFound, "no batch %s", id)
	}
	return raw, m.revs[id], nil
}

func (m *memStore) BatchIDs(context.Context) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ids []string
	for id := range m.records {
		ids = append(ids, id)
	}
	return ids, nil
}

func (m *memStore) PutBatchLine(_ context.Context, id string, i int, line []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lines[fmt.Sprint(id, "/", i)] = line
	return nil
}

func (m *memStore) BatchLine(_ context.Context, id string, i int) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.lines[fmt.Sprint(id, "/", i)]
	if !ok {
		return nil, genq.Errorf(genq.NotFound, "no line %d", i)
	}
	return raw, nil
}

// memQueue answers every job submitted at once; it keeps what was
// submitted and cancelled.
type memQueue struct {
	mu        sync.Mutex
	submitted []string
	cancelled []string
}

func (q *memQueue) Submit(_ context.Context, job genq.Job) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.submitted = append(q.submitted, job.ID)
	return nil
}

func (q *memQueue) CancelJob(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.cancelled = append(q.cancelled, id)
}

func (q *memQueue) Running(context.Context, string) (bool, genq.Progress, error) {
	return false, genq.Progress{}, nil
}

func (q *memQueue) ran(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.submitted {
		if s == id {
			return true
		}
	}
	return false
}

// lineRoutes reads a request's body as {"prompt": ...}: "bad" is refused
// when checked, "fail" fails when run; any other is answered with its
// prompt.
type lineRoutes struct {
	queue   *memQueue
	mu      sync.Mutex
	metered []string // tenant names, one per answered request
}

type lineBody struct {
	Prompt string `json:"prompt"`
}

func (r *lineRoutes) LineJobs(b openai.Batch, l openai.BatchLine, i int, _ string) ([]genq.Job, error) {
	var body lineBody
	if err := json.Unmarshal(l.Body, &body); err != nil {
		return nil, genq.Errorf(genq.Invalid, "body: %v", err)
	}
	if body.Prompt == "bad" {
		return nil, genq.Errorf(genq.Invalid, "prompt: bad")
	}
	return []genq.Job{{Envelope: genq.Envelope{ID: LineJobID(b.ID, i)}}}, nil
}

func (r *lineRoutes) LineAnswers(openai.Batch, openai.BatchLine) int { return 1 }

func (r *lineRoutes) LineModel(openai.Batch, openai.BatchLine) string { return "m" }

func (r *lineRoutes) LineOutcome(_ context.Context, _ string, ids []string, refused error, _ string,
	request json.RawMessage) (any, int, tenant.Usage, error) {
	if refused != nil {
		return genq.ErrorMessage(refused), http.StatusBadRequest, tenant.Usage{}, refused
	}
	if !r.queue.ran(ids[0]) {
		return nil, 0, tenant.Usage{}, genq.Errorf(genq.NotFound, "no outcome of %s yet", ids[0])
	}
	var body lineBody
	_ = json.Unmarshal(request, &body)
	if body.Prompt == "fail" {
		return "failed", http.StatusInternalServerError, tenant.Usage{}, genq.Errorf(genq.Internal, "the job failed")
	}
	return "answer to " + body.Prompt, http.StatusOK, tenant.Usage{CompletionTokens: 1}, nil
}

func (r *lineRoutes) ShareAs(ctx context.Context, _ string) context.Context { return ctx }

func (r *lineRoutes) MeterLine(_ context.Context, name string, _ tenant.Usage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.metered = append(r.metered, name)
}

func (r *lineRoutes) LineSpan(ctx context.Context, _ Record, _ int) (context.Context, trace.Span) {
	return ctx, trace.SpanFromContext(ctx)
}

// inputFile is a batch's input file of one request per prompt.
func inputFile(prompts ...string) []byte {
	var b bytes.Buffer
	for i, p := range prompts {
		fmt.Fprintf(&b, `{"custom_id":"c%d","method":"POST","url":"/v1/chat/completions","body":{"prompt":%q}}`+"\n", i, p)
	}
	return b.Bytes()
}

// runUntilEnded steps batch id until it ends, at most rounds times.
func runUntilEnded(t *testing.T, r *Runner, id string, rounds int) Record {
	t.Helper()
	mem := batchMemory{states: map[string]map[int]lineState{}, inputs: map[string]*batchInput{}, ended: map[string]bool{}}
	for range rounds {
		if err := r.stepBatch(context.Background(), id, r.Config, &mem); err != nil {
			t.Fatalf("step: %v", err)
		}
		if mem.ended[id] {
			break
		}
	}
	rec, _, err := Read(context.Background(), r.Store, id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func newRunner(store *memStore, queue *memQueue, routes *lineRoutes, window int) *Runner {
	return &Runner{Routes: routes, Store: store, Queue: queue, Instance: "api-1",
		Config: Config{Window: window, LeaseFor: time.Minute, ChecksPerRound: 4, PollEvery: time.Second},
		Log:    slog.New(slog.DiscardHandler)}
}

func TestRunnerEndsBatch(t *testing.T) {
	tests := []struct {
		name            string
		prompts         []string
		status          string
		completed       int
		failed          int
		output, errFile []string // custom ids, in order
		metered         int
	}{
		{"all answered", []string{"a", "b", "c"}, openai.BatchCompleted, 3, 0, []string{"c0", "c1", "c2"}, nil, 3},
		{"one fails when run", []string{"a", "fail", "c"}, openai.BatchCompleted, 2, 1, []string{"c0", "c2"}, []string{"c1"}, 2},
		{"one refused when checked", []string{"a", "bad"}, openai.BatchFailed, 0, 0, nil, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			store, queue := newMemStore(), &memQueue{}
			routes := &lineRoutes{queue: queue}
			r := newRunner(store, queue, routes, 2) // a window smaller than some batches
			store.files["file-in"] = inputFile(tt.prompts...)
			b := openai.Batch{ID: "batch_1", Endpoint: "/v1/chat/completions", InputFileID: "file-in", Status: openai.BatchValidating}
			if _, err := Write(ctx, store, Record{Batch: b, Run: Progress{Tenant: "t1"}}, 0); err != nil {
				t.Fatal(err)
			}
			rec := runUntilEnded(t, r, b.ID, 20)
			if rec.Batch.Status != tt.status {
				t.Fatalf("status %s, want %s (errors %+v)", rec.Batch.Status, tt.status, rec.Batch.Errors)
			}
			if got := rec.Batch.RequestCounts; got.Completed != tt.completed || got.Failed != tt.failed {
				t.Errorf("counts %+v, want %d completed, %d failed", got, tt.completed, tt.failed)
			}
			if tt.status == openai.BatchFailed {
				if rec.Batch.Errors == nil || !strings.Contains(rec.Batch.Errors.Data[0].Message, "prompt: bad") {
					t.Errorf("errors %+v, want the refused line named", rec.Batch.Errors)
				}
				if len(queue.submitted) != 0 {
					t.Errorf("a failed batch queued %v", queue.submitted)
				}
			}
			checkFile(t, store, rec.Batch.OutputFileID, tt.output)
			checkFile(t, store, rec.Batch.ErrorFileID, tt.errFile)
			if len(routes.metered) != tt.metered {
				t.Errorf("metered %v, want %d answers for t1", routes.metered, tt.metered)
			}
		})
	}
}

// checkFile checks that file id holds the output lines of the custom ids
// want, in order; no file when want is empty.
func checkFile(t *testing.T, store *memStore, id *string, want []string) {
	t.Helper()
	if id == nil {
		if len(want) > 0 {
			t.Errorf("no file, want lines %v", want)
		}
		return
	}
	var got []string
	for raw := range bytes.SplitSeq(bytes.TrimSpace(store.files[*id]), []byte("\n")) {
		var l openai.BatchOutputLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("file %s: %v", *id, err)
		}
		got = append(got, l.CustomID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("file %s holds %v, want %v", *id, got, want)
	}
}

func TestRunnerLeavesBatchHeldByAnother(t *testing.T) {
	ctx := context.Background()
	store, queue := newMemStore(), &memQueue{}
	r := newRunner(store, queue, &lineRoutes{queue: queue}, 4)
	store.files["file-in"] = inputFile("a")
	b := openai.Batch{ID: "batch_1", Endpoint: "/v1/chat/completions", InputFileID: "file-in", Status: openai.BatchValidating}
	held := Progress{Owner: "api-2", Lease: time.Now().Add(time.Minute).UnixMilli()}
	if _, err := Write(ctx, store, Record{Batch: b, Run: held}, 0); err != nil {
		t.Fatal(err)
	}
	rec := runUntilEnded(t, r, b.ID, 3)
	if rec.Batch.Status != openai.BatchValidating || rec.Run.Owner != "api-2" {
		t.Errorf("batch held by api-2 moved on: status %s, owner %s", rec.Batch.Status, rec.Run.Owner)
	}
}

func TestRunnerCancels(t *testing.T) {
	ctx := context.Background()
	store, queue := newMemStore(), &memQueue{}
	r := newRunner(store, queue, &lineRoutes{queue: queue}, 4)
	store.files["file-in"] = inputFile("a", "b")
	b := openai.Batch{ID: "batch_1", Endpoint: "/v1/chat/completions", InputFileID: "file-in", Status: openai.BatchCancelling}
	run := Progress{Lines: 2, Queued: 1}
	if _, err := Write(ctx, store, Record{Batch: b, Run: run}, 0); err != nil {
		t.Fatal(err)
	}
	rec := runUntilEnded(t, r, b.ID, 3)
	if rec.Batch.Status != openai.BatchCancelled {
		t.Fatalf("status %s, want cancelled", rec.Batch.Status)
	}
	if want := []string{LineJobID(b.ID, 0)}; fmt.Sprint(queue.cancelled) != fmt.Sprint(want) {
		t.Errorf("cancelled %v, want %v (only the request queued)", queue.cancelled, want)
	}
	if len(queue.submitted) != 0 {
		t.Errorf("a cancelling batch queued %v", queue.submitted)
	}
}

func TestLineJobIDs(t *testing.T) {
	tests := []struct {
		count int
		want  []string
	}{
		{0, []string{"batch_x_3"}}, // a request refused has one id all the same
		{1, []string{"batch_x_3"}},
		{3, []string{"batch_x_3", "batch_x_3-1", "batch_x_3-2"}},
	}
	for _, tt := range tests {
		if got := LineJobIDs("batch_x", 3, tt.count); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("LineJobIDs(batch_x, 3, %d) = %v, want %v", tt.count, got, tt.want)
		}
	}
}

func TestReadNamesBadRecord(t *testing.T) {
	store := newMemStore()
	store.records["batch_1"], store.revs["batch_1"] = []byte("{"), 1
	_, _, err := Read(context.Background(), store, "batch_1")
	if err == nil || !strings.Contains(err.Error(), "batch batch_1") {
		t.Errorf("Read of a broken record: %v, want an error naming batch_1", err)
	}
}
