// Package hubtest runs a model hub in the test process: it speaks the
// Hugging Face Hub's HTTP protocol (the revision and tree listings, resolve
// URLs with their metadata headers, a redirect of LFS files to a second
// "CDN" host, Range requests) and can be told to misbehave.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is one file of a repository. LFS files are served by the CDN host
// through a redirect, as the real hub does; the others by the hub itself.
type File struct {
	Path string
	Data []byte
	LFS  bool
}

// Repo is a model repository with one branch, "main", at Commit.
type Repo struct {
	ID      string // owner/name
	Commit  string // 40 hex digits; derived from ID when empty
	Files   []File
	Private bool // without the token: 401 RepoNotFound, as the hub answers
	Gated   bool // without the token: 403 GatedRepo
	// GatedFiles leaves the listing open and gates only the content, as
	// the real hub does for gated models.
	GatedFiles bool
}

// Fault makes the server misbehave for one file's content.
type Fault struct {
	FailStatus int   // answer this status…
	FailTimes  int   // …this many times first
	CutAfter   int64 // once: close the connection after this many body bytes
	Corrupt    bool  // always: serve the content with one byte changed
}

// Request is what the server saw.
type Request struct {
	Host          string // "hub" or "cdn"
	Method        string
	Path          string
	Authorization string
	Range         string
	Status        int
}

// Server is the hub and its CDN.
type Server struct {
	Hub *httptest.Server
	CDN *httptest.Server
	// Token is the one token that opens private and gated repositories.
	Token string
	// NoTree makes the tree API answer 404, like an older hub.
	NoTree bool
	// NoRevision makes the revision API answer 404: the commit is then
	// only in the X-Repo-Commit of the resolve answers.
	NoRevision bool
	// NoBlobs ignores ?blobs=true: siblings carry names only, so the client
	// has to HEAD each file for its size.
	NoBlobs bool
	// NoHead answers 501 to HEAD on resolve URLs, as Python's http.server does.
	NoHead bool
	// PageSize > 0 pages the tree listing with Link headers.
	PageSize int
	// CDNURL is the base URL LFS files redirect to; empty means CDN.URL.
	// Set it to reach the CDN under another name, such as a subdomain.
	CDNURL string

	mu       sync.Mutex
	repos    map[string]*Repo
	faults   map[string]*Fault
	requests []Request
}

// New starts a hub and its CDN, closed when the test ends.
func New(t testing.TB) *Server {
	s := &Server{repos: map[string]*Repo{}, faults: map[string]*Fault{}}
	s.Hub = httptest.NewServer(s.logged("hub", http.HandlerFunc(s.serveHub)))
	s.CDN = httptest.NewServer(s.logged("cdn", http.HandlerFunc(s.serveCDN)))
	t.Cleanup(s.Hub.Close)
	t.Cleanup(s.CDN.Close)
	return s
}

// AddRepo adds or replaces a repository.
func (s *Server) AddRepo(r Repo) {
	if r.Commit == "" {
		sum := sha1.Sum([]byte(r.ID))
		r.Commit = hex.EncodeToString(sum[:])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[r.ID] = &r
}

// SetFault makes the content of path misbehave.
func (s *Server) SetFault(path string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &f
}

// Requests returns every request seen so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ContentGETs returns the requests that fetched file content: resolve GETs
// on the hub and blob GETs on the CDN.
func (s *Server) ContentGETs() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodGet && (r.Host == "cdn" || strings.Contains(r.Path, "/resolve/")) {
			out = append(out, r)
		}
	}
	return out
}

// SHA256 is the hex sha256 of data, as LFS names it.
func SHA256(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// gitBlobID is the id git gives a blob: sha1 of "blob <size>\0<data>".
func gitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) logged(host string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			s.mu.Lock()
			s.requests = append(s.requests, Request{Host: host, Method: r.Method, Path: r.URL.Path,
				Authorization: r.Header.Get("Authorization"), Range: r.Header.Get("Range"), Status: rec.status})
			s.mu.Unlock()
		}()
		next.ServeHTTP(rec, r)
	})
}

// splitEscaped splits an escaped path into unescaped segments.
func splitEscaped(p string) []string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i, x := range parts {
		if u, err := url.PathUnescape(x); err == nil {
			parts[i] = u
		}
	}
	return parts
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	parts := splitEscaped(r.URL.EscapedPath())
	switch {
	case len(parts) >= 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "revision" && r.Method == http.MethodGet:
		s.serveRevision(w, r, parts[2]+"/"+parts[3], parts[5])
	case len(parts) >= 6 && parts[0] == "api" && parts[1] == "models" && parts[4] == "tree" && r.Method == http.MethodGet:
		s.serveTree(w, r, parts[2]+"/"+parts[3], parts[5])
	case len(parts) >= 5 && parts[2] == "resolve":
		s.serveResolve(w, r, parts[0]+"/"+parts[1], parts[3], strings.Join(parts[4:], "/"))
	default:
		hubError(w, http.StatusNotFound, "", "Not Found")
	}
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// lookup finds the repository at revision and checks the token, answering
// the error itself when it fails.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, id, rev string) *Repo {
	s.mu.Lock()
	repo := s.repos[id]
	s.mu.Unlock()
	authorized := s.Token == "" || r.Header.Get("Authorization") == "Bearer "+s.Token
	switch {
	case repo == nil:
		hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
	case repo.Private && !authorized:
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Invalid username or password.")
	case repo.Gated && !authorized:
		hubError(w, http.StatusForbidden, "GatedRepo",
			"Access to model "+id+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
	case rev != "main" && rev != repo.Commit:
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
	default:
		return repo
	}
	return nil
}

func (s *Server) serveRevision(w http.ResponseWriter, r *http.Request, id, rev string) {
	if s.NoRevision {
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	repo := s.lookup(w, r, id, rev)
	if repo == nil {
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true" && !s.NoBlobs
	siblings := make([]map[string]any, 0, len(repo.Files))
	for _, f := range repo.Files {
		sib := map[string]any{"rfilename": f.Path}
		if blobs {
			sib["blobId"] = gitBlobID(f.Data)
			sib["size"] = len(f.Data)
			if f.LFS {
				sib["lfs"] = map[string]any{"sha256": SHA256(f.Data), "size": len(f.Data), "pointerSize": 134}
			}
		}
		siblings = append(siblings, sib)
	}
	writeJSON(w, map[string]any{
		"_id": "0123456789abcdef01234567", "id": repo.ID, "modelId": repo.ID, "sha": repo.Commit,
		"private": repo.Private, "gated": gatedValue(repo.Gated), "disabled": false,
		"lastModified": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), "siblings": siblings,
	})
}

func gatedValue(g bool) any {
	if g {
		return "manual"
	}
	return false
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, id, rev string) {
	if s.NoTree {
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	repo := s.lookup(w, r, id, rev)
	if repo == nil {
		return
	}
	entries := treeEntries(repo)
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := len(entries)
	if s.PageSize > 0 && start+s.PageSize < end {
		end = start + s.PageSize
		next := *r.URL
		q := next.Query()
		q.Set("cursor", strconv.Itoa(end))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, s.Hub.URL, next.RequestURI()))
	}
	writeJSON(w, entries[min(start, end):end])
}

// treeEntries lists directories and files as the tree API does.
func treeEntries(repo *Repo) []map[string]any {
	var out []map[string]any
	dirs := map[string]bool{}
	for _, f := range repo.Files {
		for d := dirOf(f.Path); d != "" && !dirs[d]; d = dirOf(d) {
			dirs[d] = true
			out = append(out, map[string]any{"type": "directory", "oid": gitBlobID([]byte(d)), "size": 0, "path": d})
		}
		e := map[string]any{"type": "file", "oid": gitBlobID(f.Data), "size": len(f.Data), "path": f.Path}
		if f.LFS {
			e["lfs"] = map[string]any{"oid": SHA256(f.Data), "size": len(f.Data), "pointerSize": 134}
		}
		out = append(out, e)
	}
	return out
}

func dirOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, id, rev, path string) {
	if r.Method == http.MethodHead && s.NoHead {
		http.Error(w, "Unsupported method ('HEAD')", http.StatusNotImplemented)
		return
	}
	repo := s.lookup(w, r, id, rev)
	if repo == nil {
		return
	}
	if repo.GatedFiles && r.Header.Get("Authorization") != "Bearer "+s.Token {
		hubError(w, http.StatusForbidden, "GatedRepo",
			"Access to model "+id+" is restricted and you are not in the authorized list. Visit https://huggingface.co/"+id+" to ask for access.")
		return
	}
	f := findFile(repo, path)
	if f == nil {
		hubError(w, http.StatusNotFound, "EntryNotFound", path+" does not exist on \""+rev+"\"")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if !f.LFS {
		w.Header().Set("ETag", `"`+gitBlobID(f.Data)+`"`)
		s.serveContent(w, r, f)
		return
	}
	sum := SHA256(f.Data)
	w.Header().Set("ETag", `"`+sum+`"`)
	w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.Data)))
	cdn := s.CDNURL
	if cdn == "" {
		cdn = s.CDN.URL
	}
	w.Header().Set("Location", cdn+"/blobs/"+sum+"?X-Amz-Signature=presigned&path="+url.QueryEscape(path))
	w.WriteHeader(http.StatusFound)
}

func findFile(repo *Repo, path string) *File {
	for i := range repo.Files {
		if repo.Files[i].Path == path {
			return &repo.Files[i]
		}
	}
	return nil
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	sum := strings.TrimPrefix(r.URL.Path, "/blobs/")
	if r.URL.Query().Get("X-Amz-Signature") == "" {
		http.Error(w, "missing signature", http.StatusForbidden)
		return
	}
	s.mu.Lock()
	var found *File
	for _, repo := range s.repos {
		for i := range repo.Files {
			if repo.Files[i].LFS && SHA256(repo.Files[i].Data) == sum {
				found = &repo.Files[i]
			}
		}
	}
	s.mu.Unlock()
	if found == nil {
		http.Error(w, "no such blob", http.StatusNotFound)
		return
	}
	s.serveContent(w, r, found)
}

// serveContent serves a file's bytes with Range support, and its faults.
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, f *File) {
	data, cut, status := s.applyFault(f.Path, f.Data)
	if status != 0 {
		http.Error(w, http.StatusText(status), status)
		return
	}
	if cut > 0 && r.Method == http.MethodGet {
		serveCut(w, r, data, cut)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func (s *Server) applyFault(path string, data []byte) (out []byte, cut int64, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.faults[path]
	if f == nil {
		return data, 0, 0
	}
	if f.FailTimes > 0 {
		f.FailTimes--
		return nil, 0, f.FailStatus
	}
	if f.Corrupt && len(data) > 0 {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
	}
	cut, f.CutAfter = f.CutAfter, 0
	return data, cut, 0
}

// serveCut promises the whole (ranged) body and then drops the connection
// after cut bytes: what a network failure looks like to the client.
func serveCut(w http.ResponseWriter, r *http.Request, data []byte, cut int64) {
	start := int64(0)
	if rest, ok := strings.CutPrefix(r.Header.Get("Range"), "bytes="); ok {
		from, _, _ := strings.Cut(rest, "-")
		start, _ = strconv.ParseInt(from, 10, 64)
	}
	body := data[min(start, int64(len(data))):]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if start > 0 {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
		w.WriteHeader(http.StatusPartialContent)
	}
	w.Write(body[:min(cut, int64(len(body)))])
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	panic(http.ErrAbortHandler)
}
