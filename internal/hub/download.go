package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
