package httpapi

import (
	"context"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// OpenAI's Files API, for the Batch API's input and output: POST /v1/files
// (multipart, purpose "batch"), GET /v1/files, GET /v1/files/{id}, GET
// /v1/files/{id}/content, DELETE /v1/files/{id}. Files live in JetStream's
// object store (BatchStore), so any api replica serves them.

// BatchStore keeps the Batch API's files and batch records
// (natsqueue.BatchStore).
type BatchStore interface {
	// The runner's part: records, kept lines, files read and written.
	batchrun.Store
	// File is NotFound for a file that is not there.
	File(ctx context.Context, id string) (genq.StoredFile, error)
	Files(ctx context.Context) ([]genq.StoredFile, error)
	DeleteFile(ctx context.Context, id string) error
}

// BatchConfig sizes the Files and Batch APIs.
type BatchConfig struct {
	// MaxFileBytes bounds an uploaded file (MAX_FILE_BYTES).
	MaxFileBytes int64
	// FileTTL is how long files and batches are kept (FILE_TTL).
	FileTTL time.Duration
	// Window is how many of a batch's requests are queued at once: the
	// rest wait in its input file, so a batch of 50,000 lines neither fills
	// the batch queue nor outlives a queued job's age.
	Window int
	// LeaseFor is how long an api's hold on a batch lasts without being
	// renewed; after it another api carries the batch on.
	LeaseFor time.Duration
	// ChecksPerRound is how many outcomes of unfinished requests a round
	// of the batch runner reads, the oldest first, before it stops at the
	// first still running.
	ChecksPerRound int
	// Expiry is how long after its creation a batch expires: 24 hours, as
	// its completion_window says (the only one OpenAI's API offers). Not a
	// setting: tests shorten it to see a batch expire.
	Expiry time.Duration
}

// Defaults of BatchConfig.
const (
	DefaultMaxFileBytes = 100 << 20
	DefaultFileTTL      = 30 * 24 * time.Hour
	defaultBatchWindow  = 256
	defaultLeaseFor     = 15 * time.Second
	defaultChecks       = 32
)

func (c BatchConfig) withDefaults() BatchConfig {
	if c.MaxFileBytes <= 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.FileTTL <= 0 {
		c.FileTTL = DefaultFileTTL
	}
	if c.Window <= 0 {
		c.Window = defaultBatchWindow
	}
	if c.LeaseFor <= 0 {
		c.LeaseFor = defaultLeaseFor
	}
	if c.Expiry <= 0 {
		c.Expiry = 24 * time.Hour
	}
	if c.ChecksPerRound <= 0 {
		c.ChecksPerRound = defaultChecks
	}
	return c
}

var errNoBatches = genq.Errorf(genq.Unavailable, "the Files and Batch APIs are not available on this server")

// requireBatches answers the Files and Batch routes with 503 on a server
// without a batch store or asynchronous jobs, which run the batches.
func (s *Server) requireBatches(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.batches == nil || s.async == nil {
			discardBody(w, r)
			writeV1Error(w, s.log, errNoBatches)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) fileOf(f genq.StoredFile) openai.File {
	return openai.FileOf(f, int64(s.cfg.Batches.withDefaults().FileTTL/time.Second))
}

func (s *Server) handleFileUpload(w http.ResponseWriter, r *http.Request) {
	limit := s.cfg.Batches.withDefaults().MaxFileBytes
	if r.ContentLength > limit+1<<20 {
		discardBody(w, r)
		s.rejectAs(w, genq.Errorf(genq.TooLarge, "the file is over the limit of %d bytes (MAX_FILE_BYTES)", limit), writeV1Error)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20) // the form's other parts and boundaries besides
	mr, err := r.MultipartReader()
	if err != nil {
		s.rejectAs(w, genq.Errorf(genq.Invalid, "POST /v1/files takes multipart/form-data with a file and its purpose: %v", err), writeV1Error)
		return
	}
	purpose := ""
	var stored *genq.StoredFile
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.rejectAs(w, uploadError(err, limit), writeV1Error)
			return
		}
		switch part.FormName() {
		case "purpose":
			b, _ := io.ReadAll(io.LimitReader(part, 64))
			purpose = string(b)
		case "file":
			if purpose != "" && purpose != openai.PurposeBatch {
				s.rejectAs(w, badPurpose(purpose), writeV1Error)
				return
			}
			f, err := s.storeUpload(r.Context(), part, limit)
			if err != nil {
				s.rejectAs(w, err, writeV1Error)
				return
			}
			stored = &f
		}
		part.Close()
	}
	switch {
	case purpose != openai.PurposeBatch:
		if stored != nil {
			_ = s.batches.DeleteFile(context.WithoutCancel(r.Context()), stored.ID)
		}
		s.rejectAs(w, badPurpose(purpose), writeV1Error)
		return
	case stored == nil:
		s.rejectAs(w, genq.Errorf(genq.Invalid, "file is required: the form's file part"), writeV1Error)
		return
	}
	s.log.Info("file stored", "file_id", stored.ID, "bytes", stored.Bytes)
	writeJSON(w, http.StatusOK, s.fileOf(*stored))
}

func badPurpose(p string) error {
	return genq.Errorf(genq.Invalid, "purpose %q is not supported: this server takes files for the Batch API, purpose \"batch\"", p)
}

func uploadError(err error, limit int64) error {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return genq.Errorf(genq.TooLarge, "the file is over the limit of %d bytes (MAX_FILE_BYTES)", limit)
	}
	return genq.Errorf(genq.Invalid, "the multipart form is malformed: %v", err)
}

// storeUpload streams the form's file part into the store, refusing one
// over limit: the api holds a chunk of it at a time, not the whole file.
func (s *Server) storeUpload(ctx context.Context, part *multipart.Part, limit int64) (genq.StoredFile, error) {
	f := genq.StoredFile{ID: "file-" + s.newID(), Filename: part.FileName(), Purpose: openai.PurposeBatch, CreatedAt: time.Now().Unix()}
	in := &cappedReader{r: part, limit: limit}
	stored, err := s.batches.PutFile(ctx, f, in)
	switch {
	case in.over:
		return stored, genq.Errorf(genq.TooLarge, "the file is over the limit of %d bytes (MAX_FILE_BYTES)", limit)
	case in.err != nil: // the client's upload, not the store, failed
		return stored, uploadError(in.err, limit)
	}
	return stored, err
}

// cappedReader reads r up to limit bytes, and fails past it (the store
// then drops what it had taken). It remembers why it failed.
type cappedReader struct {
	r     io.Reader
	n     int64
	limit int64
	over  bool
	err   error // r's own error, io.EOF aside
}

var errOverLimit = errors.New("over the limit")

func (c *cappedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	switch {
	case c.n > c.limit:
		c.over = true
		return 0, errOverLimit
	case err != nil && !errors.Is(err, io.EOF):
		c.err = err
	}
	return n, err
}

func (s *Server) handleFileList(w http.ResponseWriter, r *http.Request) {
	files, err := s.batches.Files(r.Context())
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	q := r.URL.Query()
	if p := q.Get("purpose"); p != "" {
		files = slices.DeleteFunc(files, func(f genq.StoredFile) bool { return f.Purpose != p })
	}
	if q.Get("order") != "asc" {
		slices.Reverse(files) // newest first, as OpenAI lists them
	}
	page, err := pageOf(files, q.Get("after"), q.Get("limit"), 10000, func(f genq.StoredFile) string { return f.ID })
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	out := openai.List[openai.File]{Object: "list", Data: []openai.File{}, HasMore: page.more}
	for _, f := range page.items {
		out.Data = append(out.Data, s.fileOf(f))
	}
	if len(out.Data) > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[len(out.Data)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// page is a page of a list and whether more follow.
type page[T any] struct {
	items []T
	more  bool
}

// pageOf is the page of items after the one whose id is after, at most
// limit of them (20 unless asked, at most max).
func pageOf[T any](items []T, after, limit string, max int, id func(T) string) (page[T], error) {
	n := 20
	if limit != "" {
		v, err := strconv.Atoi(limit)
		if err != nil || v < 1 || v > max {
			return page[T]{}, genq.Errorf(genq.Invalid, "limit must be between 1 and %d, not %q", max, limit)
		}
		n = v
	}
	if after != "" {
		i := slices.IndexFunc(items, func(x T) bool { return id(x) == after })
		if i < 0 {
			return page[T]{}, genq.Errorf(genq.Invalid, "after names %q, which is not in the list", after)
		}
		items = items[i+1:]
	}
	if len(items) > n {
		return page[T]{items: items[:n], more: true}, nil
	}
	return page[T]{items: items}, nil
}

func (s *Server) handleFileGet(w http.ResponseWriter, r *http.Request) {
	f, err := s.batches.File(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fileOf(f))
}

func (s *Server) handleFileContent(w http.ResponseWriter, r *http.Request) {
	data, err := s.batches.FileData(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) handleFileDelete(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if err := s.batches.DeleteFile(r.Context(), id); err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "file", "deleted": true})
}
