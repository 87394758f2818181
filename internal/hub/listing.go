package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// RemoteFile is one file of a snapshot, as the hub describes it.
type RemoteFile struct {
	Path   string // slash-separated, relative to the repository root
	Size   int64  // bytes; -1 while unknown
	BlobID string // the git blob id, when the hub gave it
	// SHA256 is the LFS object id: the sha256 of the content. Empty for
	// files kept in git itself, whose only check is their size.
	SHA256 string
}

// IsLFS reports whether the hub stores the file in LFS, with a sha256.
func (f RemoteFile) IsLFS() bool { return f.SHA256 != "" }

// Snapshot is the list of files of one revision of a repository.
type Snapshot struct {
	Repo     string
	Revision string // as asked: a branch, tag or commit
	Commit   string // the commit sha the revision pointed to; empty if the hub did not say
	Files    []RemoteFile
}

// revisionInfo is the part of GET /api/models/{repo}/revision/{rev} we use.
type revisionInfo struct {
	SHA      string `json:"sha"`
	Siblings []struct {
		RFilename string   `json:"rfilename"`
		BlobID    string   `json:"blobId"`
		Size      *int64   `json:"size"`
		LFS       *lfsInfo `json:"lfs"`
	} `json:"siblings"`
}

// lfsInfo is spelt {"oid","size"} in the tree API and {"sha256","size"} in
// the siblings of the revision API.
type lfsInfo struct {
	OID    string `json:"oid"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

func (l *lfsInfo) sum() string {
	if l == nil {
		return ""
	}
	if l.SHA256 != "" {
		return strings.ToLower(l.SHA256)
	}
	return strings.ToLower(l.OID)
}

// treeEntry is one element of GET /api/models/{repo}/tree/{rev}?recursive=true.
type treeEntry struct {
	Type string   `json:"type"` // "file" or "directory"
	Path string   `json:"path"`
	OID  string   `json:"oid"`
	Size int64    `json:"size"`
	LFS  *lfsInfo `json:"lfs"`
}

// Snapshot lists the files of repo at revision. It asks the revision API
// (for the commit sha) and the tree API (for sizes and LFS hashes), and makes
// do with whichever the hub serves; sizes still missing come from a HEAD on
// each file's resolve URL, as the hub's own client does.
func (c *Client) Snapshot(ctx context.Context, repo, revision string) (*Snapshot, error) {
	snap, err := c.list(ctx, repo, revision)
	if err != nil {
		return nil, err
	}
	if err := c.fillUnknownSizes(ctx, snap, snap.Files, nil); err != nil {
		return nil, explain(err, c.Endpoint(), repo, revision)
	}
	return snap, nil
}

func (c *Client) list(ctx context.Context, repo, revision string) (*Snapshot, error) {
	if err := validateRepoID(repo); err != nil {
		return nil, err
	}
	snap := &Snapshot{Repo: repo, Revision: revision}
	info, infoErr := c.revision(ctx, repo, revision)
	if infoErr != nil && !errors.Is(infoErr, ErrNotFound) {
		return nil, explain(infoErr, c.Endpoint(), repo, revision)
	}
	entries, treeErr := c.tree(ctx, repo, revision)
	switch {
	case treeErr == nil:
		snap.Files = filesFromTree(entries)
	case info != nil && treeFallbackOK(treeErr):
		// An older or smaller hub without the tree API: use the siblings.
	case infoErr != nil:
		return nil, explain(infoErr, c.Endpoint(), repo, revision)
	default:
		return nil, explain(treeErr, c.Endpoint(), repo, revision)
	}
	if info != nil {
		snap.Commit = info.SHA
		snap.Files = mergeSiblings(snap.Files, info)
	}
	return snap, nil
}

func treeFallbackOK(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && (he.StatusCode == http.StatusNotFound ||
		he.StatusCode == http.StatusMethodNotAllowed || he.StatusCode == http.StatusNotImplemented ||
		he.StatusCode == http.StatusBadRequest)
}

var repoIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

func validateRepoID(repo string) error {
	if !repoIDPattern.MatchString(repo) || strings.Contains(repo, "..") {
		return fmt.Errorf("repository id %q: want owner/name", repo)
	}
	return nil
}

func (c *Client) revision(ctx context.Context, repo, revision string) (*revisionInfo, error) {
	u := c.apiURL(url.Values{"blobs": {"true"}}, "api/models", escapeRepo(repo), "revision", url.PathEscape(revision))
	var info revisionInfo
	if _, err := c.getJSON(ctx, u, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// tree reads every page of the recursive tree listing; the hub pages long
// listings with a Link: <…>; rel="next" header.
func (c *Client) tree(ctx context.Context, repo, revision string) ([]treeEntry, error) {
	next := c.apiURL(url.Values{"recursive": {"true"}}, "api/models", escapeRepo(repo), "tree", url.PathEscape(revision))
	var all []treeEntry
	for pages := 0; next != ""; pages++ {
		if pages > 10000 {
			return nil, errors.New("tree listing: too many pages")
		}
		var page []treeEntry
		h, err := c.getJSON(ctx, next, &page)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		next, err = c.nextPage(h)
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

var linkNextPattern = regexp.MustCompile(`<([^>]+)>\s*;\s*rel="?next"?`)

// nextPage follows a Link header, but only on the hub itself: a listing
// must not send the token elsewhere, nor be steered to another host.
func (c *Client) nextPage(h http.Header) (string, error) {
	m := linkNextPattern.FindStringSubmatch(h.Get("Link"))
	if m == nil {
		return "", nil
	}
	u, err := c.endpoint.Parse(m[1])
	if err != nil {
		return "", fmt.Errorf("tree listing: bad Link header: %w", err)
	}
	if !sameOrigin(u, c.endpoint) {
		return "", fmt.Errorf("tree listing: next page on another host %s", u.Host)
	}
	return u.String(), nil
}

func filesFromTree(entries []treeEntry) []RemoteFile {
	var files []RemoteFile
	for _, e := range entries {
		if e.Type != "" && e.Type != "file" {
			continue
		}
		f := RemoteFile{Path: e.Path, Size: e.Size, BlobID: e.OID, SHA256: e.LFS.sum()}
		if e.LFS != nil && e.LFS.Size > 0 {
			f.Size = e.LFS.Size
		}
		files = append(files, f)
	}
	return files
}

// mergeSiblings adds what the revision API knows: the files the tree did
// not list (all of them when there was no tree), and LFS hashes the tree
// left out. On the real hub both list the same files.
func mergeSiblings(files []RemoteFile, info *revisionInfo) []RemoteFile {
	byPath := make(map[string]int, len(files))
	for i, f := range files {
		byPath[f.Path] = i
	}
	for _, s := range info.Siblings {
		f := RemoteFile{Path: s.RFilename, Size: -1, BlobID: s.BlobID, SHA256: s.LFS.sum()}
		if s.Size != nil {
			f.Size = *s.Size
		}
		if s.LFS != nil && s.LFS.Size > 0 {
			f.Size = s.LFS.Size
		}
		i, ok := byPath[f.Path]
		switch {
		case ok && files[i].SHA256 == "":
			files[i].SHA256 = f.SHA256
		case !ok:
			files = append(files, f)
		}
	}
	return files
}

// fillUnknownSizes completes the sizes the listing did not give: from
// known, the manifest of an earlier download of the same commit, or else
// from a HEAD on the file. A hub that does not answer HEAD leaves the size
// unknown (-1) until the transfer tells it. files are updated in place.
func (c *Client) fillUnknownSizes(ctx context.Context, snap *Snapshot, files []RemoteFile, known *Manifest) error {
	sameCommit := known != nil && snap.Commit != "" && known.Repo == snap.Repo && known.Commit == snap.Commit
	headWorks := true
	for i := range files {
		f := &files[i]
		if f.Size >= 0 || !IsSafePath(f.Path) {
			continue
		}
		if mf, ok := known.file(f.Path); ok && sameCommit {
			f.Size = mf.Size
			if mf.LFS && f.SHA256 == "" {
				f.SHA256 = mf.SHA256
			}
			continue
		}
		if !headWorks {
			continue
		}
		m, err := c.FileMetadata(ctx, snap.Repo, snap.Revision, f.Path)
		if headUnsupported(err) {
			headWorks = false
			continue
		}
		if err != nil {
			return fmt.Errorf("metadata of %s: %w", f.Path, err)
		}
		f.Size = m.Size // still -1 if the hub did not say
		if f.SHA256 == "" {
			f.SHA256 = m.SHA256
		}
		if snap.Commit == "" {
			snap.Commit = m.Commit
		}
	}
	return nil
}

func headUnsupported(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && (he.StatusCode == http.StatusMethodNotAllowed || he.StatusCode == http.StatusNotImplemented)
}

// FileMetadata is what a HEAD on a resolve URL says about a file.
type FileMetadata struct {
	Size   int64  // -1 if the hub did not say
	SHA256 string // set for LFS files (X-Linked-Etag)
	ETag   string
	Commit string // X-Repo-Commit
}

// FileMetadata HEADs the file's resolve URL without following the redirect
// to the CDN: the hub's redirect carries X-Linked-Size and X-Linked-Etag.
func (c *Client) FileMetadata(ctx context.Context, repo, revision, path string) (*FileMetadata, error) {
	meta := &respMeta{}
	err := c.retry.do(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(withMeta(ctx, meta), http.MethodHead, c.resolveURL(repo, revision, path), nil)
		if err != nil {
			return permanent(err)
		}
		req.Header.Set("Accept-Encoding", "identity") // so Content-Length is the file's size
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		defer drainClose(resp.Body)
		meta.record(resp)
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			return nil // the redirect to the CDN: its headers are the answer
		}
		err = checkStatus(resp)
		if headUnsupported(err) {
			return permanent(err) // a 501 is no outage: do not retry it
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return meta.metadata(), nil
}

func (c *Client) resolveURL(repo, revision, path string) string {
	return c.apiURL(nil, escapeRepo(repo), "resolve", url.PathEscape(revision), escapePath(path))
}

// respMeta collects the hub's metadata headers over a redirect chain.
type respMeta struct {
	mu         sync.Mutex
	commit     string
	etag       string
	linkedETag string
	size       int64
	linkedSize int64
	sizeKnown  bool
	linkedKnow bool
}

type metaKey struct{}

func withMeta(ctx context.Context, m *respMeta) context.Context {
	return context.WithValue(ctx, metaKey{}, m)
}

func metaFrom(ctx context.Context) *respMeta {
	m, _ := ctx.Value(metaKey{}).(*respMeta)
	return m
}

func (m *respMeta) record(resp *http.Response) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := resp.Header
	if v := h.Get("X-Repo-Commit"); v != "" {
		m.commit = v
	}
	if v := cleanETag(h.Get("X-Linked-Etag")); v != "" {
		m.linkedETag = v
	}
	if v := cleanETag(h.Get("ETag")); v != "" && m.etag == "" {
		m.etag = v
	}
	if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil {
		m.linkedSize, m.linkedKnow = n, true
	} else if resp.StatusCode < 300 && resp.ContentLength >= 0 && !m.sizeKnown {
		m.size, m.sizeKnown = resp.ContentLength, true
	}
}

func (m *respMeta) repoCommit() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.commit
}

func (m *respMeta) metadata() *FileMetadata {
	m.mu.Lock()
	defer m.mu.Unlock()
	fm := &FileMetadata{Size: -1, ETag: m.etag, Commit: m.commit}
	switch {
	case m.linkedKnow:
		fm.Size = m.linkedSize
	case m.sizeKnown:
		fm.Size = m.size
	}
	if isSHA256(m.linkedETag) {
		fm.SHA256 = m.linkedETag
	}
	return fm
}

// cleanETag strips the weak marker and the quotes: W/"abc" → abc.
func cleanETag(s string) string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "W/")
	return strings.ToLower(strings.Trim(s, `"`))
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func isSHA256(s string) bool { return sha256Pattern.MatchString(s) }
