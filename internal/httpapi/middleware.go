package httpapi

import (
	"crypto/rand"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
)

// statusRecorder remembers the status a handler wrote, and the request
// it answers and the server's log, for the line an error's answer logs
// (logAnswered).
type statusRecorder struct {
	http.ResponseWriter
	status int
	req    *http.Request
	log    *slog.Logger
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// HeaderRequestID names every response, as OpenAI's do: its SDKs read it
// into request_id. Genq-Job-Id names the job.
const HeaderRequestID = "X-Request-Id"

// HeaderAnthropicRequestID carries the same id on Anthropic's routes,
// under the name Anthropic's SDKs read into a message's _request_id
// (requestID in Node) and an error's request_id.
const HeaderAnthropicRequestID = "Request-Id"

// requestID gives every response an id of its own; it draws none from the
// jobs' ids.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := "req_" + rand.Text()
		w.Header().Set(HeaderRequestID, id)
		if isMessagesPath(r.URL.Path) {
			w.Header().Set(HeaderAnthropicRequestID, id)
		}
		next.ServeHTTP(w, r)
	})
}

// isMessagesPath reports whether path is under Anthropic's Messages API,
// which answers in its own error shape.
func isMessagesPath(path string) bool {
	return path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/")
}

// countRequests counts requests by route pattern and method, each from a
// fixed set, so unknown paths and made-up methods do not grow the label set
// (and the api's memory) at a client's will.
func (s *Server) countRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, req: r, log: s.log}
		next.ServeHTTP(rec, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		s.metrics.requests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(status)).Inc()
	})
}

// routeOf names r's route in a log: its pattern once routed, else (not
// found, or refused on its way, by a router's middleware) its path.
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" && !strings.HasSuffix(rc.RoutePattern(), "*") {
		return rc.RoutePattern()
	}
	return r.URL.Path
}

// methodLabel is the method when HTTP defines it, else "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// recoverPanics turns a handler's panic into a 500 and keeps serving.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panicked", "panic", v, "path", r.URL.Path)
				writeError(w, s.log, genq.Errorf(genq.Internal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// requireAPIKey checks the bearer token when API keys are configured
// (tenant.Keys.Lookup compares digests in constant time) and puts the
// key's tenant in the request's context; without keys every request is
// openTenant's. When the handler has answered, the request is settled
// with what it took (settle). The scheme is case-insensitive, as HTTP's
// auth schemes are.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return s.requireAPIKeyAs(writeError)(next)
}

// requireAPIKeyAs is requireAPIKey answering refusals with render, in its
// routes' error shape.
func (s *Server) requireAPIKeyAs(render errorRenderer) func(http.Handler) http.Handler {
	return s.requireAPIKeyFor(func(*http.Request) errorRenderer { return render })
}

// requireAPIKeyFor is requireAPIKey answering refusals in the error shape
// of the API a request's route belongs to.
func (s *Server) requireAPIKeyFor(renderFor func(*http.Request) errorRenderer) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler { return s.apiKeys(renderFor, next) }
}

// apiKeys is requireAPIKeyFor's middleware.
func (s *Server) apiKeys(renderFor func(*http.Request) errorRenderer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := tenant.Tenant{Name: openTenant}
		if s.keys.Required() {
			token, ok := bearerToken(r)
			if ok {
				t, ok = s.keys.Lookup(token)
			}
			if !ok {
				s.metrics.rejections.WithLabelValues("unauthorized").Inc()
				discardBody(w, r)
				w.Header().Set("WWW-Authenticate", `Bearer realm="genq"`)
				renderFor(r)(w, s.log, genq.Errorf(genq.Unauthorized, "a valid API key is required: send Authorization: Bearer <key>, x-api-key: <key>, or Basic with the key as the password"))
				return
			}
		}
		c := &caller{tenant: t}
		// The tenant's name, never its key, marks the request's trace.
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.String("genq.tenant", t.Name))
		defer func() { s.settle(r.Context(), c, routePattern(r)) }() // a handler's panic too ends its request in flight
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), c)))
	})
}
