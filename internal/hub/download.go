package hub

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// stagingDir holds partial files, under the target directory so that the
// final rename stays on one file system and is atomic.
const stagingDir = ".genq-download"

// Options says what to download and where.
type Options struct {
	Repo     string
	Revision string // branch, tag or commit; empty means "main"
	Dir      string
	Include  []string // empty: every file
	Exclude  []string
	Parallel int // files fetched at once; 0 means 4
	Reporter Reporter
	// FreeSpace reports the bytes available in dir; nil means statfs.
	FreeSpace func(dir string) (uint64, error)
	// StallTimeout gives up on a transfer (and retries it) after this long
	// without a byte; 0 means 60s.
	StallTimeout time.Duration
}

// Result says what a download did.
type Result struct {
	Manifest        *Manifest
	Downloaded      int
	DownloadedBytes int64 // bytes received over the network
	Skipped         int   // files already complete
	SkippedBytes    int64
	Excluded        int      // files the patterns left out
	Refused         []string // unsafe names in the listing
	Elapsed         time.Duration
}

// task is one selected file and what is already on disk for it.
type task struct {
	file    RemoteFile
	skip    bool   // complete on disk
	sha256  string // when skipping: the content's hash
	partial int64  // bytes of a partial download to resume
}

type downloader struct {
	c      *Client
	opts   Options
	root   *os.Root
	report Reporter

	mu           sync.Mutex
	commit       string // learnt from X-Repo-Commit when the listing had none
	fetched      int64
	fetchedOK    int
	fetchedFiles map[string]ManifestFile // what the fetched files turned out to be
}

// Download fetches a snapshot of opts.Repo into opts.Dir. Files already
// complete are skipped, partial ones resumed; each file is verified, then
// renamed into place. The manifest is written when every file is there.
func (c *Client) Download(ctx context.Context, opts Options) (*Result, error) {
	started := time.Now()
	opts = opts.withDefaults()
	filter, err := NewFilter(opts.Include, opts.Exclude)
	if err != nil {
		return nil, err
	}
	snap, err := c.list(ctx, opts.Repo, opts.Revision)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	selected := selectFiles(snap, filter, res)
	if len(selected) == 0 {
		return res, nothingSelected(snap, opts, res)
	}
	if err := c.fillUnknownSizes(ctx, snap, selected, readManifestAt(opts.Dir)); err != nil {
		return res, explain(err, c.Endpoint(), opts.Repo, opts.Revision)
	}
	root, err := openTarget(opts.Dir)
	if err != nil {
		return res, err
	}
	defer root.Close()
	// Fails, harmlessly, while partial files remain for a later resume.
	defer root.Remove(stagingDir)
	d := &downloader{c: c, opts: opts, root: root, report: opts.Reporter, commit: snap.Commit}
	defer d.report.Close()

	old := previousManifest(root)
	selected = d.refuseSymlinkEscapes(selected, res)
	if len(selected) == 0 {
		return res, refusedError(res.Refused)
	}
	tasks, err := d.plan(selected, old)
	if err != nil {
		return res, err
	}
	res.Skipped, res.SkippedBytes = countSkipped(tasks)
	if err := d.checkSpace(tasks); err != nil {
		return res, err
	}
	if err := d.retireManifest(tasks); err != nil {
		return res, err
	}
	err = d.run(ctx, tasks)
	res.Downloaded, res.DownloadedBytes = d.fetchedOK, d.fetched
	res.Elapsed = time.Since(started)
	if err != nil {
		return res, err
	}
	res.Manifest, err = d.finish(snap, tasks, old)
	res.Elapsed = time.Since(started)
	if err != nil {
		return res, err
	}
	return res, refusedError(res.Refused)
}

func countSkipped(tasks []task) (files int, bytes int64) {
	for _, t := range tasks {
		if t.skip {
			files++
			bytes += t.file.Size
		}
	}
	return files, bytes
}

func (o Options) withDefaults() Options {
	o.Revision = cmp.Or(o.Revision, "main")
	o.Dir = cmp.Or(o.Dir, ".")
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Reporter == nil {
		o.Reporter = NopReporter{}
	}
	if o.FreeSpace == nil {
		o.FreeSpace = freeSpace
	}
	if o.StallTimeout <= 0 {
		o.StallTimeout = 60 * time.Second
	}
	return o
}

// selectFiles keeps the safe files the filter selects. Unsafe names are
// refused whether or not a pattern selects them: a listing that holds one
// is not to be trusted, and the user should hear of it.
func selectFiles(snap *Snapshot, filter *Filter, res *Result) []RemoteFile {
	var selected []RemoteFile
	for _, f := range snap.Files {
		switch {
		case !IsSafePath(f.Path):
			res.Refused = append(res.Refused, f.Path)
		case filter.Match(f.Path):
			selected = append(selected, f)
		default:
			res.Excluded++
		}
	}
	slices.SortFunc(selected, func(a, b RemoteFile) int { return strings.Compare(a.Path, b.Path) })
	return selected
}

func nothingSelected(snap *Snapshot, opts Options, res *Result) error {
	if len(res.Refused) > 0 && res.Excluded == 0 {
		return refusedError(res.Refused)
	}
	names := make([]string, 0, 10)
	for _, f := range snap.Files {
		if len(names) == cap(names) {
			names = append(names, "…")
			break
		}
		names = append(names, f.Path)
	}
	return fmt.Errorf("%w: no file of %s at %q matches include %q and exclude %q; the repository holds %d files (%s): adjust --include/--exclude",
		ErrNothingSelected, snap.Repo, snap.Revision, opts.Include, opts.Exclude, len(snap.Files), strings.Join(names, ", "))
}

func refusedError(refused []string) error {
	if len(refused) == 0 {
		return nil
	}
	quoted := make([]string, len(refused))
	for i, r := range refused {
		quoted[i] = strconv.Quote(r)
	}
	return fmt.Errorf("%w: the listing names %d file(s) that would escape the target directory, refused: %s",
		ErrUnsafePath, len(refused), strings.Join(quoted, ", "))
}

// openTarget creates dir and opens it as a root: every later file operation
// goes through it, so no name and no symlink inside can lead out.
func openTarget(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the target directory: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the target directory: %w", err)
	}
	if err := root.MkdirAll(stagingDir, 0o755); err != nil {
		root.Close()
		return nil, fmt.Errorf("creating the staging directory: %w", err)
	}
	return root, nil
}

// refuseSymlinkEscapes refuses the files whose directory is a symlink that
// leads out of the target, so that they are reported like unsafe names.
// os.Root would refuse them anyway, with a less telling error.
func (d *downloader) refuseSymlinkEscapes(files []RemoteFile, res *Result) []RemoteFile {
	kept := files[:0]
	for _, f := range files {
		if d.escapesThroughSymlink(f.Path) {
			res.Refused = append(res.Refused, f.Path)
			continue
		}
		kept = append(kept, f)
	}
	return kept
}

func (d *downloader) escapesThroughSymlink(name string) bool {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		fi, err := d.root.Lstat(dir)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		target, err := d.root.Readlink(dir)
		if err != nil || path.IsAbs(target) || !filepath.IsLocal(filepath.FromSlash(path.Join(path.Dir(dir), target))) {
			return true
		}
	}
	return false
}

// plan decides, per file, whether it is complete on disk (skip), partially
// there (resume) or absent.
func (d *downloader) plan(files []RemoteFile, old *Manifest) ([]task, error) {
	tasks := make([]task, 0, len(files))
	for _, f := range files {
		t, err := d.planFile(f, old)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		tasks = append(tasks, t)
	}
	return tasks, nil
}

func (d *downloader) planFile(f RemoteFile, old *Manifest) (task, error) {
	t := task{file: f}
	sum, complete, err := d.completeOnDisk(f, old)
	if err != nil {
		return t, err
	}
	if complete {
		t.skip, t.sha256 = true, sum
		return t, nil
	}
	if f.Size < 0 {
		return t, nil // nothing to compare with: fetch it whole
	}
	if fi, err := d.root.Stat(partName(f)); err == nil && fi.Mode().IsRegular() && fi.Size() <= f.Size {
		t.partial = fi.Size()
	}
	return t, nil
}

// completeOnDisk reports whether the target file is there with the right
// content. A file the previous manifest vouches for (same size, same LFS
// hash) is trusted without reading it again: rehashing 140 GB to learn
// that nothing changed would make a rerun take as long as a download.
func (d *downloader) completeOnDisk(f RemoteFile, old *Manifest) (sum string, ok bool, err error) {
	fi, err := d.root.Lstat(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != f.Size {
		return "", false, nil
	}
	if old != nil && !f.IsLFS() && old.Commit != "" && d.commit != "" && !strings.EqualFold(old.Commit, d.commit) {
		// A new commit: a git file of the same size may still differ, and
		// it has no hash to tell. Such files are small; fetch them again.
		return "", false, nil
	}
	if old != nil {
		if mf, found := old.file(f.Path); found && mf.Size == f.Size && mf.SHA256 != "" && (!f.IsLFS() || mf.SHA256 == f.SHA256) {
			return mf.SHA256, true, nil
		}
	}
	if f.Size >= 64<<20 {
		d.report.Check(f) // minutes for tens of GB: say why nothing seems to happen
	}
	sum, err = d.hashFile(f.Path)
	if err != nil {
		return "", false, err
	}
	// Files outside LFS have no published sha256; their size is the check.
	return sum, !f.IsLFS() || sum == f.SHA256, nil
}

func (d *downloader) hashFile(name string) (string, error) {
	file, err := d.root.Open(name)
	if err != nil {
		return "", err
	}
	defer file.Close()
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkSpace fails before any byte is fetched if the disk cannot hold what is left.
func (d *downloader) checkSpace(tasks []task) error {
	var need int64
	files := 0
	for _, t := range tasks {
		if !t.skip {
			need += max(t.file.Size, 0) - t.partial // an unknown size counts as 0: the hub would not say
			files++
		}
	}
	d.report.Plan(files, need)
	if need == 0 {
		return nil
	}
	free, err := d.opts.FreeSpace(d.opts.Dir)
	if err != nil {
		return fmt.Errorf("checking free disk space: %w", err)
	}
	if uint64(need) > free {
		return fmt.Errorf("%w in %s: the download needs %s more, and only %s is free",
			ErrNoSpace, d.opts.Dir, FormatBytes(need), FormatBytes(int64(min(free, 1<<62))))
	}
	return nil
}

// run fetches the files that are not complete, opts.Parallel at a time. The
// first failure stops the others: what they fetched stays for a resume.
func (d *downloader) run(ctx context.Context, tasks []task) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan task)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for range d.opts.Parallel {
		wg.Go(func() {
			for t := range work {
				err := d.fetch(ctx, t)
				if err != nil {
					mu.Lock()
					if ctx.Err() == nil || len(errs) == 0 {
						errs = append(errs, fmt.Errorf("%s: %w", t.file.Path, explain(err, d.c.Endpoint(), d.opts.Repo, d.opts.Revision)))
					}
					mu.Unlock()
					cancel()
				}
			}
		})
	}
	for i := range tasks {
		if tasks[i].skip {
			d.report.Skip(tasks[i].file)
			continue
		}
		select {
		case work <- tasks[i]:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return ctx.Err()
}

// retireManifest moves the manifest aside before the directory changes: a
// download that stops half-way must not leave a manifest that describes
// files no longer there. The manifest says what the directory holds, or is
// absent. The next run still reads the retired one, to spare rehashing.
func (d *downloader) retireManifest(tasks []task) error {
	if c, _ := countSkipped(tasks); c == len(tasks) {
		return nil
	}
	err := d.root.Rename(ManifestName, retiredManifest)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("moving the old manifest aside: %w", err)
	}
	return nil
}

// finish writes the manifest, unless it already says the same.
func (d *downloader) finish(snap *Snapshot, tasks []task, old *Manifest) (*Manifest, error) {
	commit := d.commit
	if commit == "" && d.fetchedOK == 0 && old != nil && old.Repo == snap.Repo && old.Revision == snap.Revision {
		// A hub that names the commit only in X-Repo-Commit, and a rerun
		// that fetched nothing: the files checked out, keep what we knew.
		commit = old.Commit
	}
	m := &Manifest{
		Endpoint:     d.c.Endpoint(),
		Repo:         snap.Repo,
		Revision:     snap.Revision,
		Commit:       commit,
		Include:      d.opts.Include,
		Exclude:      d.opts.Exclude,
		DownloadedAt: time.Now().UTC().Truncate(time.Second),
	}
	for _, t := range tasks {
		mf := ManifestFile{Path: t.file.Path, Size: t.file.Size, SHA256: t.sha256, LFS: t.file.IsLFS()}
		if !t.skip {
			mf = d.fetchedFiles[t.file.Path]
		}
		m.Files = append(m.Files, mf)
	}
	if m.sameContent(old) {
		return old, nil
	}
	if err := writeManifest(d.root, m); err != nil {
		return nil, err
	}
	_ = d.root.Remove(retiredManifest)
	return m, nil
}

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
	return nil
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
		return err
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
