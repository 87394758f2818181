package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// partName is where a file is fetched to. It is named by content when the
// hub gave a hash, so that a resume never appends one revision's bytes to
// another's, and by path too, since a repository may hold the same content
// twice and both copies may be in flight at once.
func partName(f RemoteFile) string {
	key := f.SHA256
	if key == "" {
		key = f.BlobID
	}
	if strings.ContainsAny(key, `/\.`) {
		key = ""
	}
	p := sha256.Sum256([]byte(f.Path))
	return path.Join(stagingDir, key+"-"+hex.EncodeToString(p[:8])+".part")
}

// fetch downloads one file, with retries, and renames it into place.
func (d *downloader) fetch(ctx context.Context, t task) error {
	started := time.Now()
	d.report.Start(t.file, t.partial)
	var got ManifestFile
	attempts := d.c.retry.Attempts
	err := d.c.retry.doNotify(ctx, func(ctx context.Context) error {
		var err error
		got, err = d.transfer(ctx, t.file)
		return err
	}, func(attempt int, delay time.Duration, err error) {
		d.report.Retry(t.file, attempt, attempts, delay, err)
	})
	if err != nil {
		return err
	}
	if err := d.install(t.file); err != nil {
		return err
	}
	d.mu.Lock()
	d.fetchedOK++
	if d.fetchedFiles == nil {
		d.fetchedFiles = make(map[string]ManifestFile)
	}
	d.fetchedFiles[got.Path] = got
	d.mu.Unlock()
	t.file.Size = got.Size
	d.report.Done(t.file, time.Since(started))
	return nil
}

// install renames the verified partial file into place.
func (d *downloader) install(f RemoteFile) error {
	if dir := path.Dir(f.Path); dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	if err := d.root.Rename(partName(f), f.Path); err != nil {
		return fmt.Errorf("moving into place: %w", err)
	}
	d.syncDir(path.Dir(f.Path))
	return nil
}

// syncDir makes a rename durable: without it, a crash can undo the rename
// of a file whose content was already synced. Best effort: some file
// systems cannot sync a directory, and the content is safe either way.
func (d *downloader) syncDir(dir string) {
	if df, err := d.root.Open(dir); err == nil {
		_ = df.Sync()
		_ = df.Close()
	}
}

var errStalled = errors.New("no data received for too long")

// transfer makes one attempt: it resumes the partial file with a Range
// request, appends, verifies, and returns the content's sha256. A short
// transfer leaves the partial file for the next attempt; a wrong one
// removes it.
func (d *downloader) transfer(ctx context.Context, f RemoteFile) (ManifestFile, error) {
	name := partName(f) // before receive learns more about f
	file, err := d.root.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return ManifestFile{}, permanent(err)
	}
	defer file.Close()
	h, offset, err := resumeState(file, f)
	if err != nil {
		return ManifestFile{}, permanent(err)
	}
	if f.Size < 0 || offset < f.Size {
		if err := d.receive(ctx, file, h, &f, offset); err != nil {
			d.removeIfEmpty(file, name)
			return ManifestFile{}, err
		}
	}
	return d.verify(file, name, h, f, offset > 0)
}

// removeIfEmpty leaves no empty partial file behind a request that failed
// before its first byte, such as a 403.
func (d *downloader) removeIfEmpty(file *os.File, name string) {
	if fi, err := file.Stat(); err == nil && fi.Size() == 0 {
		_ = d.root.Remove(name)
	}
}

// resumeState hashes what a partial file already holds and returns where to go on.
func resumeState(file *os.File, f RemoteFile) (hash.Hash, int64, error) {
	h := sha256.New()
	fi, err := file.Stat()
	if err != nil {
		return nil, 0, err
	}
	if f.Size < 0 || fi.Size() > f.Size {
		return h, 0, truncate(file)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	n, err := io.Copy(h, file)
	return h, n, err
}

func truncate(file *os.File) error {
	if err := file.Truncate(0); err != nil {
		return err
	}
	_, err := file.Seek(0, io.SeekStart)
	return err
}

// receive GETs the file from offset on and appends it to file and h.
func (d *downloader) receive(ctx context.Context, file *os.File, h hash.Hash, f *RemoteFile, offset int64) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	meta := &respMeta{}
	req, err := http.NewRequestWithContext(withMeta(ctx, meta), http.MethodGet, d.c.resolveURL(d.opts.Repo, d.opts.Revision, f.Path), nil)
	if err != nil {
		return permanent(err)
	}
	req.Header.Set("Accept-Encoding", "identity") // the bytes, not a gzip of them, or the hash and the Range would not match
	if offset > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", offset))
	}
	resp, err := d.c.http.Do(req)
	if err != nil {
		return redactURLError(err)
	}
	defer resp.Body.Close()
	if sameOrigin(resp.Request.URL, d.c.endpoint) {
		meta.record(resp)
	}
	if err := d.checkCommit(meta.repoCommit()); err != nil {
		return err
	}
	learnFromRedirect(f, meta)
	if offset, err = startOffset(resp, offset); err != nil {
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			_ = truncate(file)
		}
		return err
	}
	if offset == 0 {
		if err := truncate(file); err != nil {
			return permanent(err)
		}
		h.Reset()
	}
	want := int64(-1) // unknown: the body's end is the file's
	if f.Size >= 0 {
		want = f.Size - offset
	}
	return d.copyBody(ctx, cancel, file, h, resp.Body, want)
}

// redactURLError drops the query from the URL in a transport error: a
// pre-signed CDN URL carries its signature there, and errors get logged.
func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}

// learnFromRedirect fills in what a names-only listing left out, from the
// X-Linked-Etag and X-Linked-Size of the hub's redirect to the CDN, so that
// such a file is still checked against its sha256.
func learnFromRedirect(f *RemoteFile, meta *respMeta) {
	meta.mu.Lock()
	defer meta.mu.Unlock()
	if f.SHA256 == "" && isSHA256(meta.linkedETag) {
		f.SHA256 = meta.linkedETag
	}
	if f.Size < 0 && meta.linkedKnow {
		f.Size = meta.linkedSize
	}
}

// startOffset checks the server's answer to a (Range) request, and says
// where its body starts: a server that ignores Range sends the whole file.
func startOffset(resp *http.Response, offset int64) (int64, error) {
	switch resp.StatusCode {
	case http.StatusOK:
		return 0, nil
	case http.StatusPartialContent:
		start, err := contentRangeStart(resp.Header.Get("Content-Range"))
		if err != nil || start != offset {
			return 0, fmt.Errorf("asked for bytes from %d, got Content-Range %q", offset, resp.Header.Get("Content-Range"))
		}
		return offset, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// The partial file does not fit the server's file: start over.
		return 0, fmt.Errorf("%w: range from %d not satisfiable, starting over", errRetryable, offset)
	}
	return 0, checkStatus(resp)
}

func contentRangeStart(v string) (int64, error) {
	rest, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, errors.New("not a byte range")
	}
	start, _, _ := strings.Cut(rest, "-")
	return strconv.ParseInt(start, 10, 64)
}

// checkCommit makes sure every file comes from the listed commit: a branch
// that moves during a download would otherwise mix two revisions.
func (d *downloader) checkCommit(commit string) error {
	if commit == "" {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.commit == "":
		d.commit = commit
	case !strings.EqualFold(d.commit, commit):
		return permanent(fmt.Errorf("%w: %q pointed at %s when listed and at %s now: run the download again",
			ErrRevisionMoved, d.opts.Revision, d.commit, commit))
	}
	return nil
}

// copyBody appends at most want bytes (all of them when want < 0), and one
// more to notice a body that is too long. A transfer that stalls is
// cancelled, so that it is retried.
func (d *downloader) copyBody(ctx context.Context, cancel context.CancelCauseFunc, file *os.File, h hash.Hash, body io.Reader, want int64) error {
	stall := time.AfterFunc(d.opts.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	if want >= 0 {
		body = io.LimitReader(body, want+1)
	}
	src := &watchedReader{r: body, onRead: func(n int) {
		stall.Reset(d.opts.StallTimeout)
		d.report.Add(int64(n))
		d.mu.Lock()
		d.fetched += int64(n)
		d.mu.Unlock()
	}}
	n, err := io.Copy(io.MultiWriter(file, h), src)
	if err != nil {
		if errors.Is(context.Cause(ctx), errStalled) {
			return errStalled
		}
		var werr *fs.PathError
		if errors.As(err, &werr) {
			return permanent(werr) // a write failed: the disk, not the network
		}
		return err
	}
	if want >= 0 && n < want {
		return fmt.Errorf("transfer ended after %d of %d bytes: %w", n, want, io.ErrUnexpectedEOF)
	}
	return nil
}

type watchedReader struct {
	r      io.Reader
	onRead func(int)
}

func (w *watchedReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.onRead(n)
	}
	return n, err
}

// verify checks the size, and the sha256 of LFS files. A file that fails is
// removed. If it had been resumed, the old part may be the culprit, so the
// error is retryable: the next attempt starts from zero.
func (d *downloader) verify(file *os.File, name string, h hash.Hash, f RemoteFile, resumed bool) (ManifestFile, error) {
	fi, err := file.Stat()
	if err != nil {
		return ManifestFile{}, permanent(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	var problem string
	switch {
	case f.Size >= 0 && fi.Size() != f.Size:
		problem = fmt.Sprintf("size is %d bytes, the hub says %d", fi.Size(), f.Size)
	case f.IsLFS() && sum != f.SHA256:
		problem = fmt.Sprintf("sha256 is %s, the hub says %s", sum, f.SHA256)
	}
	if problem == "" {
		if err := file.Sync(); err != nil {
			return ManifestFile{}, permanent(err)
		}
		return ManifestFile{Path: f.Path, Size: fi.Size(), SHA256: sum, LFS: f.IsLFS()}, nil
	}
	file.Close()
	_ = d.root.Remove(name)
	err = fmt.Errorf("%w: %s", ErrIntegrity, problem)
	if resumed {
		return ManifestFile{}, fmt.Errorf("%w (after a resume: starting over)", err)
	}
	return ManifestFile{}, permanent(err)
}
