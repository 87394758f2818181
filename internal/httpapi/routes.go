package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/genq/genq/internal/anthropic"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// routes is every route the api serves to its clients. /metrics is not one
// of them: it is served on an internal address (NewMetricsHandler).
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.traceRequests, s.requestID, s.recoverPanics, s.countRequests)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, s.log, genq.Errorf(genq.NotFound, "no route %s", r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
		writeJSON(w, http.StatusMethodNotAllowed, errorResponse{Error: "method " + req.Method + " is not allowed on " + req.URL.Path})
	})

	r.Get("/", s.handleRoot)
	// The web UI: its files are open (they hold no data and must show the
	// key prompt), its status route takes a key as /v1 does.
	r.Get("/ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently).ServeHTTP)
	r.Handle("/ui/*", s.uiHandler())
	r.With(s.requireAPIKeyAs(writeV1Error)).Get("/ui/api/status", s.handleUIStatus)
	r.Get("/readiness", s.handleReadiness)
	r.With(s.requireAPIKey).Post("/generate", s.handleGenerate)

	// OpenAI's API, with its error shape, and Anthropic's Messages API
	// beside it, with its own; the keys guard all of it, as theirs do.
	r.Route("/v1", func(v1 chi.Router) {
		v1.Use(s.requireAPIKeyFor(func(r *http.Request) errorRenderer {
			if isMessagesPath(r.URL.Path) {
				return writeAnthropicError
			}
			return writeV1Error
		}))
		v1.NotFound(func(w http.ResponseWriter, req *http.Request) {
			if isMessagesPath(req.URL.Path) {
				writeAnthropicError(w, s.log, genq.Errorf(genq.NotFound, "Not Found: no route %s", req.URL.Path))
				return
			}
			writeV1Error(w, s.log, genq.Errorf(genq.NotFound, "no route %s", req.URL.Path))
		})
		v1.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
			if isMessagesPath(req.URL.Path) {
				writeJSON(w, http.StatusMethodNotAllowed, anthropic.ErrorResponse{Type: "error", Error: anthropic.Error{
					Type: "invalid_request_error", Message: "Method Not Allowed: " + req.Method + " is not allowed on " + req.URL.Path}})
				return
			}
			writeJSON(w, http.StatusMethodNotAllowed, openai.ErrorResponse{Error: openai.Error{
				Message: "method " + req.Method + " is not allowed on " + req.URL.Path, Type: "invalid_request_error", Code: "method_not_allowed"}})
		})
		v1.Post("/chat/completions", s.handleChatCompletions)
		v1.Post("/completions", s.handleCompletions)
		v1.Post("/responses", s.handleResponses)
		v1.Get("/models", s.handleModels)
		v1.Get("/models/*", s.handleModel)
		v1.Post("/images/generations", s.handleImageGenerations)
		v1.Post("/embeddings", s.handleEmbeddings)
		v1.Post("/jobs", s.handleJobSubmit)
		v1.Get("/jobs/{id}", s.handleJobGet)
		v1.Delete("/jobs/{id}", s.handleJobCancel)
		v1.Group(func(b chi.Router) {
			b.Use(s.requireBatches)
			b.Post("/files", s.handleFileUpload)
			b.Get("/files", s.handleFileList)
			b.Get("/files/{id}", s.handleFileGet)
			b.Get("/files/{id}/content", s.handleFileContent)
			b.Delete("/files/{id}", s.handleFileDelete)
			b.Post("/batches", s.handleBatchCreate)
			b.Get("/batches", s.handleBatchList)
			b.Get("/batches/{id}", s.handleBatchGet)
			b.Post("/batches/{id}/cancel", s.handleBatchCancel)
		})
		v1.Get("/usage", s.handleUsage)
		v1.Post("/messages", s.handleMessages)
		v1.Post("/messages/count_tokens", s.handleCountTokens)
	})

	// AUTOMATIC1111's web UI API (variant C), in its error shape: what
	// Open WebUI, SillyTavern and scripts call before and for txt2img.
	r.Route("/sdapi/v1", func(sd chi.Router) {
		sd.Use(s.requireAPIKeyAs(writeSDError))
		sd.NotFound(func(w http.ResponseWriter, req *http.Request) {
			writeSDError(w, s.log, genq.Errorf(genq.NotFound, "no route %s", req.URL.Path))
		})
		sd.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
			writeJSON(w, http.StatusMethodNotAllowed, sdError{Error: http.StatusText(http.StatusMethodNotAllowed),
				Detail: "method " + req.Method + " is not allowed on " + req.URL.Path})
		})
		sd.Get("/options", s.handleSDOptions)
		sd.Post("/options", s.handleSDSetOptions)
		sd.Get("/sd-models", s.handleSDModels)
		sd.Get("/samplers", s.handleSDSamplers)
		sd.Get("/schedulers", s.handleSDSchedulers)
		for _, none := range []string{"/upscalers", "/latent-upscale-modes", "/sd-vae", "/loras", "/prompt-styles"} {
			sd.Get(none, s.handleSDNone)
		}
		sd.Post("/txt2img", s.handleTxt2Img)
	})
	return r
}

// NewMetricsHandler serves GET /metrics from gatherer, and with queues
// GET /queue (handleQueueDepth), for the internal address only: scrapes
// cost memory and CPU, and the labels say more about the service than its
// clients need to know.
func NewMetricsHandler(gatherer prometheus.Gatherer, queues TenantQueues, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	if queues != nil {
		mux.Handle("GET /queue", handleQueueDepth(queues, log))
	}
	return mux
}

// allowedMethods lists the methods that have a route at path, for Allow.
func allowedMethods(r chi.Routes, path string) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if r.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	return strings.Join(allowed, ", ")
}
