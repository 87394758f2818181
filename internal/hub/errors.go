package hub

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors, for errors.Is. The errors returned carry a message that
// tells the user what to do.
var (
	ErrAccessDenied    = errors.New("access denied")           // 401 or 403
	ErrNotFound        = errors.New("not found")               // 404: repository, revision or file
	ErrNothingSelected = errors.New("no file selected")        // include/exclude left nothing
	ErrNoSpace         = errors.New("not enough disk space")   // checked before the download
	ErrUnsafePath      = errors.New("unsafe file name")        // would escape the target directory
	ErrIntegrity       = errors.New("integrity check failed")  // size or sha256 differs
	ErrRevisionMoved   = errors.New("revision moved")          // the branch changed during the download
	errRetryable       = errors.New("retryable server answer") // 5xx, 429
)

// HTTPError is a hub answer that is not a success.
type HTTPError struct {
	StatusCode int
	// ErrorCode and Message are the hub's X-Error-Code and X-Error-Message
	// headers (like GatedRepo, RepoNotFound, RevisionNotFound).
	ErrorCode string
	Message   string
	URL       string // without its query: pre-signed URLs carry secrets there
	// RetryAfter is the server's Retry-After, in seconds form; 0 if none.
	RetryAfter time.Duration
}

func (e *HTTPError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP %d from %s", e.StatusCode, e.URL)
	if e.ErrorCode != "" {
		fmt.Fprintf(&b, " (%s)", e.ErrorCode)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// Is lets errors.Is(err, ErrAccessDenied) and friends classify the status.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrAccessDenied:
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case errRetryable:
		// 501 says the server lacks a feature: no retry will grow it one.
		return (e.StatusCode >= 500 && e.StatusCode != http.StatusNotImplemented) ||
			e.StatusCode == http.StatusTooManyRequests || e.StatusCode == http.StatusRequestTimeout
	}
	return false
}

// checkStatus turns a non-2xx response into an *HTTPError.
func checkStatus(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &HTTPError{
		StatusCode: resp.StatusCode,
		ErrorCode:  resp.Header.Get("X-Error-Code"),
		Message:    resp.Header.Get("X-Error-Message"),
		URL:        redactURL(resp.Request.URL.String()),
	}
	if e.Message == "" {
		e.Message = errorBodyMessage(resp.Body)
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		e.RetryAfter = time.Duration(secs) * time.Second
	}
	return e
}

// errorBodyMessage reads the hub's {"error": "..."} body, if there is one.
func errorBodyMessage(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	s := strings.TrimSpace(string(b))
	if i := strings.Index(s, `"error":"`); i >= 0 {
		s = s[i+len(`"error":"`):]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			s = s[:j]
		}
	}
	if len(s) > 200 || strings.ContainsAny(s, "<\n") {
		return ""
	}
	return s
}

// explain turns a hub error about repo@revision into one a user can act on.
func explain(err error, endpoint, repo, revision string) error {
	var he *HTTPError
	if !errors.As(err, &he) {
		return err
	}
	page := strings.TrimRight(endpoint, "/") + "/" + repo
	switch {
	case errors.Is(he, ErrAccessDenied):
		hint := ""
		if he.ErrorCode == "RepoNotFound" {
			hint = " (or the repository does not exist, or is private to others)"
		}
		return fmt.Errorf("the hub refused access to %s%s: accept the model's licence on its hub page and check your token; the page is %s, the token comes from HF_TOKEN, HUGGING_FACE_HUB_TOKEN, MODEL_HUB_TOKEN or --token-file: %w",
			repo, hint, page, err)
	case he.StatusCode == http.StatusNotFound && he.ErrorCode == "RevisionNotFound":
		return fmt.Errorf("revision %q not found in repository %s: %w", revision, repo, err)
	case he.StatusCode == http.StatusNotFound && he.ErrorCode == "EntryNotFound":
		return fmt.Errorf("a listed file is missing from %s at %q: %w", repo, revision, err)
	case errors.Is(he, ErrNotFound):
		return fmt.Errorf("repository %s or its revision %q not found on %s: check --repo and --revision: %w", repo, revision, endpoint, err)
	}
	return err
}
