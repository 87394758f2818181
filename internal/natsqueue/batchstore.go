package natsqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/genq"
)

// The Batch API's state lives in JetStream, not in an api's memory, so
// that any api replica serves a file and carries a batch on: files in an
// object store, batches' records in a key-value bucket whose revisions
// let two apis take turns on one batch.
const (
	FilesBucket      = "GENQ_FILES"       // uploaded and written files, by id
	BatchesBucket    = "GENQ_BATCHES"     // batch records, by id
	BatchLinesBucket = "GENQ_BATCH_LINES" // the output line of each finished request, <batch id>.<index>
)

// FileStoreConfig sizes the files bucket.
type FileStoreConfig struct {
	// TTL is how long a file is kept (FILE_TTL).
	TTL time.Duration
}

// batchBuckets binds the Batch API's buckets on first use, creating them:
// only the api's batch routes need them.
type batchBuckets struct {
	mu      sync.Mutex
	files   jetstream.ObjectStore
	batches jetstream.KeyValue
	lines   jetstream.KeyValue
}

func (b *batchBuckets) bind(ctx context.Context, c *Conn, ttl time.Duration) (jetstream.ObjectStore, jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.files != nil {
		return b.files, b.batches, nil
	}
	s := c.settings
	files, err := c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: FilesBucket, Description: "genq files of the Batch API", TTL: ttl, Storage: s.storage(), Replicas: s.replicas(),
	})
	if err != nil {
		return nil, nil, genq.WrapError(genq.Unavailable, fmt.Errorf("ensure bucket %s: %w", FilesBucket, err), "the file store is unavailable")
	}
	batches, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: BatchesBucket, Description: "genq batches of the Batch API", TTL: ttl, History: 1, Storage: s.storage(), Replicas: s.replicas(),
	})
	if err != nil {
		return nil, nil, genq.WrapError(genq.Unavailable, fmt.Errorf("ensure bucket %s: %w", BatchesBucket, err), "the batch store is unavailable")
	}
	lines, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: BatchLinesBucket, Description: "genq output lines of the Batch API's requests", TTL: ttl, History: 1, Storage: s.storage(), Replicas: s.replicas(),
	})
	if err != nil {
		return nil, nil, genq.WrapError(genq.Unavailable, fmt.Errorf("ensure bucket %s: %w", BatchLinesBucket, err), "the batch store is unavailable")
	}
	b.files, b.batches, b.lines = files, batches, lines
	return files, batches, nil
}

// BatchStore keeps the Batch API's files and batch records.
type BatchStore struct {
	conn    *Conn
	ttl     time.Duration
	buckets batchBuckets
}

// NewBatchStore keeps files and batches over js's connection for ttl.
func (cl *JobStore) NewBatchStore(cfg FileStoreConfig) *BatchStore {
	return &BatchStore{conn: cl.conn, ttl: cfg.TTL}
}

func unavailable(err error, what string) error {
	return genq.WrapError(genq.Unavailable, err, "the "+what+" store is unavailable")
}

// PutFile stores a file's data under id, with its metadata.
func (s *BatchStore) PutFile(ctx context.Context, f genq.StoredFile, data io.Reader) (genq.StoredFile, error) {
	files, _, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return f, err
	}
	meta := map[string]string{"filename": f.Filename, "purpose": f.Purpose, "created_at": strconv.FormatInt(f.CreatedAt, 10)}
	info, err := files.Put(ctx, jetstream.ObjectMeta{Name: f.ID, Metadata: meta}, data)
	if err != nil {
		return f, unavailable(err, "file")
	}
	f.Bytes = int64(info.Size)
	return f, nil
}

func storedFile(info *jetstream.ObjectInfo) genq.StoredFile {
	created, _ := strconv.ParseInt(info.Metadata["created_at"], 10, 64)
	return genq.StoredFile{ID: info.Name, Filename: info.Metadata["filename"], Purpose: info.Metadata["purpose"],
		Bytes: int64(info.Size), CreatedAt: created}
}

// File is file id's metadata; a NotFound error when there is none.
func (s *BatchStore) File(ctx context.Context, id string) (genq.StoredFile, error) {
	files, _, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return genq.StoredFile{}, err
	}
	info, err := files.GetInfo(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return genq.StoredFile{}, genq.Errorf(genq.NotFound, "no file %s", id)
	}
	if err != nil {
		return genq.StoredFile{}, unavailable(err, "file")
	}
	return storedFile(info), nil
}

// FileData is file id's content.
func (s *BatchStore) FileData(ctx context.Context, id string) ([]byte, error) {
	files, _, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return nil, err
	}
	data, err := files.GetBytes(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, genq.Errorf(genq.NotFound, "no file %s", id)
	}
	if err != nil {
		return nil, unavailable(err, "file")
	}
	return data, nil
}

// Files lists every file, oldest first.
func (s *BatchStore) Files(ctx context.Context) ([]genq.StoredFile, error) {
	files, _, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return nil, err
	}
	infos, err := files.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, unavailable(err, "file")
	}
	out := make([]genq.StoredFile, 0, len(infos))
	for _, info := range infos {
		out = append(out, storedFile(info))
	}
	slices.SortFunc(out, func(a, b genq.StoredFile) int { return int(a.CreatedAt - b.CreatedAt) })
	return out, nil
}

// DeleteFile removes file id.
func (s *BatchStore) DeleteFile(ctx context.Context, id string) error {
	files, _, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return err
	}
	err = files.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return genq.Errorf(genq.NotFound, "no file %s", id)
	}
	if err != nil {
		return unavailable(err, "file")
	}
	return nil
}

// PutBatch writes batch id's record over revision (0: a new batch) and
// returns the new revision; genq.ErrChanged when another write came
// first.
func (s *BatchStore) PutBatch(ctx context.Context, id string, record []byte, revision uint64) (uint64, error) {
	_, batches, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return 0, err
	}
	var rev uint64
	if revision == 0 {
		rev, err = batches.Create(ctx, id, record)
	} else {
		rev, err = batches.Update(ctx, id, record, revision)
	}
	var apiErr *jetstream.APIError
	if errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence {
		return 0, genq.ErrChanged
	}
	if err != nil {
		return 0, unavailable(err, "batch")
	}
	return rev, nil
}

// Batch is batch id's record and its revision; NotFound when there is
// none.
func (s *BatchStore) Batch(ctx context.Context, id string) ([]byte, uint64, error) {
	_, batches, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return nil, 0, err
	}
	e, err := batches.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, genq.Errorf(genq.NotFound, "no batch %s", id)
	}
	if err != nil {
		return nil, 0, unavailable(err, "batch")
	}
	return bytes.Clone(e.Value()), e.Revision(), nil
}

// BatchIDs lists every batch's id.
func (s *BatchStore) BatchIDs(ctx context.Context) ([]string, error) {
	_, batches, err := s.buckets.bind(ctx, s.conn, s.ttl)
	if err != nil {
		return nil, err
	}
	keys, err := batches.ListKeys(ctx)
	if err != nil {
		return nil, unavailable(err, "batch")
	}
	var out []string
	for k := range keys.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// PutBatchLine keeps the output line of batch id's request i, as soon as
// it finished, so that the batch's files do not depend on the results
// store's TTL.
func (s *BatchStore) PutBatchLine(ctx context.Context, id string, i int, line []byte) error {
	if _, _, err := s.buckets.bind(ctx, s.conn, s.ttl); err != nil {
		return err
	}
	if _, err := s.buckets.lines.Put(ctx, id+"."+strconv.Itoa(i), line); err != nil {
		return unavailable(err, "batch")
	}
	return nil
}

// BatchLine is the kept output line of batch id's request i; NotFound
// while there is none.
func (s *BatchStore) BatchLine(ctx context.Context, id string, i int) ([]byte, error) {
	if _, _, err := s.buckets.bind(ctx, s.conn, s.ttl); err != nil {
		return nil, err
	}
	e, err := s.buckets.lines.Get(ctx, id+"."+strconv.Itoa(i))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, genq.Errorf(genq.NotFound, "no line %d of batch %s", i, id)
	}
	if err != nil {
		return nil, unavailable(err, "batch")
	}
	return bytes.Clone(e.Value()), nil
}
