package docs_test

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const (
	// The README is the front page; the reference lives in docs/.
	maxReadmeLines = 160
	// Longer lines scroll sideways on GitHub and in terminals, tables too.
	maxReadmeLineChars = 200
)

// repoRoot is the module root: the nearest folder above with a go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadmeIsAFrontPage(t *testing.T) {
	text := readFile(t, filepath.Join(repoRoot(t), "README.md"))
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > maxReadmeLines {
		t.Errorf("README.md has %d lines, more than %d: move reference material into docs/ and link to it",
			len(lines), maxReadmeLines)
	}
	for i, line := range lines {
		if n := utf8.RuneCountInString(line); n > maxReadmeLineChars {
			t.Errorf("README.md:%d is %d characters, more than %d: wrap it (a table's row too)", i+1, n, maxReadmeLineChars)
		}
	}
}

// A route is one registration in routes.go. An empty Method is a Handle:
// the route answers whatever methods its handler takes.
type route struct{ Method, Path string }

func (r route) String() string { return strings.TrimSpace(r.Method + " " + r.Path) }

// What routes.go is made of: chi routers nested with Route and Group,
// routes registered by method (a receiver's With(…) between them), a loop
// over a list of paths, and ServeMux patterns such as "GET /metrics".
var (
	routeBlock = regexp.MustCompile(`\b(\w+)\.Route\("([^"]*)",\s*func\((\w+) chi\.Router\)`)
	groupBlock = regexp.MustCompile(`\b(\w+)\.Group\(func\((\w+) chi\.Router\)`)
	pathLoop   = regexp.MustCompile(`for _, (\w+) := range \[\]string\{([^}]*)\}`)
	register   = regexp.MustCompile(`^\s*(\w+)\.(?:.*?\.)?(Get|Head|Post|Put|Patch|Delete|Options|Handle|HandleFunc)\(("[^"]*"|\w+)\s*,`)
	quoted     = regexp.MustCompile(`"([^"]*)"`)
	httpMethod = map[string]string{"Get": "GET", "Head": "HEAD", "Post": "POST", "Put": "PUT", "Patch": "PATCH",
		"Delete": "DELETE", "Options": "OPTIONS"}
)

// parseRoutes reads the routes out of routes.go's source, line by line. It
// follows the prefix of each router variable, so a route registered on the
// router of r.Route("/v1", func(v1 chi.Router) {…}) gets /v1 before it.
func parseRoutes(src string) ([]route, error) {
	prefix := map[string]string{}  // a router variable's path prefix; unknown ones have none
	lists := map[string][]string{} // a loop variable's paths
	var routes []route
	sc := bufio.NewScanner(strings.NewReader(src))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "//") {
			continue
		}
		if m := routeBlock.FindStringSubmatch(line); m != nil {
			prefix[m[3]] = prefix[m[1]] + m[2]
			continue
		}
		if m := groupBlock.FindStringSubmatch(line); m != nil {
			prefix[m[2]] = prefix[m[1]]
			continue
		}
		if m := pathLoop.FindStringSubmatch(line); m != nil {
			for _, q := range quoted.FindAllStringSubmatch(m[2], -1) {
				lists[m[1]] = append(lists[m[1]], q[1])
			}
			continue
		}
		m := register.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		recv, fn, arg := m[1], m[2], m[3]
		var paths []string
		if strings.HasPrefix(arg, `"`) {
			paths = []string{strings.Trim(arg, `"`)}
		} else if paths = lists[arg]; paths == nil {
			return nil, fmt.Errorf("routes.go:%d: the path %s is neither a string nor a loop over a []string literal", n, arg)
		}
		for _, p := range paths {
			r := route{Method: httpMethod[fn], Path: prefix[recv] + p}
			// A ServeMux pattern carries its method: "GET /metrics".
			if method, path, ok := strings.Cut(p, " "); ok && r.Method == "" {
				r = route{Method: method, Path: prefix[recv] + path}
			}
			routes = append(routes, r)
		}
	}
	return routes, sc.Err()
}

func TestParseRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{"by method", `r.Get("/", s.handleRoot)
	r.With(s.requireAPIKey).Post("/generate", s.handleGenerate)`, []string{"GET /", "POST /generate"}},
		{"nested routers and groups", `r.Route("/v1", func(v1 chi.Router) {
		v1.Delete("/jobs/{id}", s.handleJobCancel)
		v1.Group(func(b chi.Router) {
			b.Post("/batches/{id}/cancel", s.handleBatchCancel)
		})
	})`, []string{"DELETE /v1/jobs/{id}", "POST /v1/batches/{id}/cancel"}},
		{"a loop over paths", `r.Route("/sdapi/v1", func(sd chi.Router) {
		for _, none := range []string{"/loras", "/sd-vae"} {
			sd.Get(none, s.handleSDNone)
		}`, []string{"GET /sdapi/v1/loras", "GET /sdapi/v1/sd-vae"}},
		{"a handler of any method", `r.Handle("/ui/*", s.uiHandler())`, []string{"/ui/*"}},
		{"a ServeMux pattern", `mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))`, []string{"GET /metrics"}},
		{"comments and other calls are not routes", `// r.Get("/old", h)
	w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes, err := parseRoutes(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range routes {
				got = append(got, r.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("parseRoutes = %q, want %q", got, tc.want)
			}
		})
	}
}

// documented says whether doc names r as a code span: `POST /v1/files`,
// or for a route of any method `/ui/*` with or without one.
func documented(doc string, r route) bool {
	if r.Method != "" {
		return strings.Contains(doc, "`"+r.String()+"`")
	}
	return regexp.MustCompile("`(?:[A-Z]+ )?" + regexp.QuoteMeta(r.Path) + "`").MatchString(doc)
}

func TestEveryRouteIsInTheAPIDoc(t *testing.T) {
	root := repoRoot(t)
	routes, err := parseRoutes(readFile(t, filepath.Join(root, "internal/httpapi/routes.go")))
	if err != nil {
		t.Fatal(err)
	}
	// routes.go holds more than 30; finding few means its way of
	// registering routes changed under this parser.
	if len(routes) < 20 {
		t.Fatalf("found %d routes in internal/httpapi/routes.go: has the way it registers routes changed? Teach parseRoutes", len(routes))
	}
	doc := readFile(t, filepath.Join(root, "docs/api.md"))
	for _, r := range routes {
		if !documented(doc, r) {
			t.Errorf("%s is registered in internal/httpapi/routes.go but docs/api.md does not name it as `%s`: add it to \"Every route\"", r, r)
		}
	}
}

var (
	fence = regexp.MustCompile("^\\s*(```|~~~)")
	// A code span: links inside one are text, not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// [text](target) and ![alt](target), with an optional "title".
	mdLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	heading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	scheme  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// A line of Markdown prose and its number in its file.
type proseLine struct {
	n    int
	text string
}

// prose is a Markdown file's lines outside fenced code blocks, in order.
func prose(text string) []proseLine {
	var lines []proseLine
	in := false
	for i, line := range strings.Split(text, "\n") {
		if fence.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			lines = append(lines, proseLine{i + 1, line})
		}
	}
	return lines
}

// anchors are the ids GitHub gives a Markdown file's headings: lowercase,
// punctuation dropped, spaces as hyphens, and -1, -2… after repeats.
func anchors(text string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line.text)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) || r == '_' || r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

func TestAnchors(t *testing.T) {
	got := anchors("# The HTTP API\n```sh\n# not a heading\n```\n## Images (variant C)\n" +
		"### Anthropic's Messages API\n## The ggml engine (`IMAGE_ENGINE=ggml`)\n## 2. The images\n## Notes\n## Notes\n")
	for _, id := range []string{"the-http-api", "images-variant-c", "anthropics-messages-api",
		"the-ggml-engine-image_engineggml", "2-the-images", "notes", "notes-1"} {
		if !got[id] {
			t.Errorf("no anchor #%s in %v", id, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became a heading")
	}
}

func TestRelativeLinksLead(t *testing.T) {
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	for _, file := range files {
		text := readFile(t, filepath.Join(root, file))
		for _, line := range prose(text) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line.text, "``"), -1) {
				if err := checkLink(root, file, text, m[1]); err != nil {
					t.Errorf("%s:%d: %s: %v", file, line.n, m[1], err)
				}
			}
		}
	}
}

// checkLink says what is wrong with target, a link in file (whose text is
// text), or nil when it leads somewhere: to a file or folder of the
// repository and, when it names a heading of a Markdown file, to that.
func checkLink(root, file, text, target string) error {
	if scheme.MatchString(target) {
		return nil // another site's; not checked here
	}
	path, frag, _ := strings.Cut(target, "#")
	rel := file
	if path != "" {
		rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return errors.New("leads out of the repository")
		}
		fi, err := os.Stat(filepath.Join(root, rel))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("no file %s", rel)
		case err != nil:
			return err
		case fi.IsDir() || !strings.HasSuffix(rel, ".md") || frag == "":
			return nil
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			return err
		}
		text = string(b)
	}
	if frag != "" && strings.HasSuffix(rel, ".md") && !anchors(text)[frag] {
		return fmt.Errorf("%s has no heading whose anchor is #%s", rel, frag)
	}
	return nil
}
