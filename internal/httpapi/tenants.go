package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
	"github.com/genq/genq/internal/tenant"
)

// Tenants: the key of a request names its tenant (tenant.Keys); a
// generation request is admitted under the tenant's limits before its
// jobs are queued (admit), and settled with what it took when its handler
// returns (caller.settle), into the counters every api shares
// (tenant.Limiter) and the tenant's metrics.

// openTenant is the tenant of every request to an api without keys.
const openTenant = "anonymous"

// caller is a request's tenant and what its jobs took, kept in its
// context from the key check to the settlement.
type caller struct {
	tenant tenant.Tenant

	mu       sync.Mutex
	admitted bool
	// queued: the request queued work to run later (a job, a batch), so
	// its own usage is none; the work's is counted as it is answered.
	queued bool
	ticket *tenant.Ticket
	took   tenant.Usage
}

type callerKey struct{}

func withCaller(ctx context.Context, c *caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerOf is ctx's caller; nil outside a keyed route.
func callerOf(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// keysOf is the keys of deps, or those of cfg.APIKeys, tenants of their own
// without limits.
func keysOf(cfg Config, deps Deps) *tenant.Keys {
	if deps.Keys != nil {
		return deps.Keys
	}
	var keys []tenant.Key
	for _, k := range cfg.APIKeys {
		d := tenant.DigestOf(k)
		keys = append(keys, tenant.Key{Digest: d, Tenant: tenant.Tenant{Name: tenant.PlainName(d)}})
	}
	return tenant.NewKeys(keys)
}

// bearerToken is the key a request sends: Authorization: Bearer, x-api-key
// (Anthropic's SDKs), or Basic with the key as the password (the web UI
// API's clients send their --api-auth user:password so). ok is false when
// it sends none in a scheme genq takes.
func bearerToken(r *http.Request) (string, bool) {
	auth := r.Header.Get("Authorization")
	if key := r.Header.Get("X-Api-Key"); key != "" && auth == "" {
		return key, true
	}
	scheme, token, _ := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	if strings.EqualFold(scheme, "Basic") {
		dec, err := base64.StdEncoding.DecodeString(token)
		if err != nil {
			return "", false
		}
		_, token, _ = strings.Cut(string(dec), ":")
		return token, true
	}
	return token, strings.EqualFold(scheme, "Bearer")
}

// modelDenied is a model outside a tenant's allow-list. It is answered
// 404, as OpenAI answers a model a key may not use: the caller learns
// nothing of the models other tenants may use.
type modelDenied struct{ model string }

func (m *modelDenied) Error() string { return "model " + m.model + " is outside the key's models" }

// deniedModel is the refusal of a model outside a key's list.
func deniedModel(name string) error {
	return &genq.Error{Code: genq.NotFound, Field: "model", Err: &modelDenied{name},
		Message: "the model " + strconv.Quote(name) + " does not exist or this key may not use it"}
}

// admission is what a generation request asks of its tenant's limits.
type admission struct {
	// model is the name the request sends (an alias, say), and resolved
	// the model it gets: with no name sent, the kind's default, which a
	// key's models= list must allow as well.
	model    string
	resolved genq.Model
	cost     tenant.Cost
	deadline time.Time
	// queued: the request queues work for later (POST /v1/jobs,
	// /v1/batches); it counts against rpm, not as a model's request.
	queued bool
}

// admit admits r's request under its tenant's limits, before its jobs are
// queued, or returns the error to answer with in the route's shape: 404
// for a model outside the tenant's list, 429 with the rate-limit headers
// for a limit reached, 503 when the counters cannot be reached. An
// admitted request gets the rate-limit headers of its limits too, as
// OpenAI's answers do.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, a admission) error {
	c := callerOf(r.Context())
	if c == nil {
		return nil
	}
	if !modelAllowed(c.tenant, a.model, a.resolved) {
		return deniedModel(cmp.Or(a.model, a.resolved.Name))
	}
	var ticket *tenant.Ticket
	if s.limiter != nil {
		tk, err := s.count(w, r, c.tenant, a)
		if err != nil {
			return err
		}
		ticket = &tk
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.admitted, c.queued, c.ticket = true, a.queued, ticket
	return nil
}

// modelAllowed reports whether t may use what a request asks for: the
// name it sends, or with none the default model it gets, by its name or
// one of its aliases (as GET /v1/models lists a model for a key). A
// request of no model at all (a batch, before its lines) is allowed.
func modelAllowed(t tenant.Tenant, asked string, m genq.Model) bool {
	if asked != "" {
		return t.AllowsModel(asked)
	}
	return m.Name == "" || allowsNamed(t, m.Name, m.Aliases)
}

// allowsNamed reports whether t may use the model name, by that name or
// by one of its aliases: the one rule of the lists, the admissions and
// POST /sdapi/v1/options.
func allowsNamed(t tenant.Tenant, name string, aliases []string) bool {
	return t.AllowsModel(name) || slices.ContainsFunc(aliases, t.AllowsModel)
}

// count admits a request in t's counters, or says, in the headers and
// the log, which limit refuses it.
func (s *Server) count(w http.ResponseWriter, r *http.Request, t tenant.Tenant, a admission) (tenant.Ticket, error) {
	ctx, cancel := context.WithTimeout(r.Context(), counterTimeout)
	defer cancel()
	tk, err := s.limiter.Admit(ctx, t, a.cost, a.deadline)
	var refusal *tenant.Refusal
	switch {
	case errors.As(err, &refusal):
		s.metrics.rateLimited.WithLabelValues(t.Name, refusal.Limit).Inc()
		s.log.Info("rate limited", "tenant", t.Name, "limit", refusal.Limit, "max", refusal.Max,
			"retry_after_ms", refusal.RetryAfter.Milliseconds(), "route", r.URL.Path)
		setRateHeaders(w, r, refusal.Status)
		setRetryAfter(w, refusal.RetryAfter)
		return tk, genq.WrapError(genq.Overloaded, refusal, refusal.Error())
	case err != nil:
		return tk, genq.WrapError(genq.Unavailable, err, "the tenants' counters are unavailable; retry")
	}
	setRateHeaders(w, r, tk.Status)
	return tk, nil
}

// counterTimeout bounds one admission in the counters; settleTimeout
// one settlement, which outlasts an election of the counters' leader
// (nats-server's takes up to 9 s, a reconnect more) since its usage
// would be lost, while a refused admission is only retried.
const (
	counterTimeout = 5 * time.Second
	settleTimeout  = 20 * time.Second
)

// setRateHeaders says st in the headers OpenAI's SDKs read and, on
// Anthropic's routes, in Anthropic's: the tenant's limits, what is left
// of them, and when they reset.
func setRateHeaders(w http.ResponseWriter, r *http.Request, st tenant.Status) {
	h := w.Header()
	now := time.Now()
	set := func(kind string, limit, remaining int64, reset time.Duration) {
		if limit <= 0 {
			return
		}
		h.Set("X-Ratelimit-Limit-"+kind, strconv.FormatInt(limit, 10))
		h.Set("X-Ratelimit-Remaining-"+kind, strconv.FormatInt(remaining, 10))
		h.Set("X-Ratelimit-Reset-"+kind, reset.Round(time.Millisecond).String())
		if isMessagesPath(r.URL.Path) {
			h.Set("Anthropic-Ratelimit-"+kind+"-Limit", strconv.FormatInt(limit, 10))
			h.Set("Anthropic-Ratelimit-"+kind+"-Remaining", strconv.FormatInt(remaining, 10))
			h.Set("Anthropic-Ratelimit-"+kind+"-Reset", now.Add(reset).UTC().Format(time.RFC3339))
		}
	}
	set("Requests", st.RequestsLimit, st.RequestsRemaining, st.RequestsReset)
	set("Tokens", st.TokensLimit, st.TokensRemaining, st.TokensReset)
}

// setRetryAfter says when to retry: Retry-After in whole seconds, and
// retry-after-ms, which OpenAI's and Anthropic's SDKs prefer, exact.
func setRetryAfter(w http.ResponseWriter, after time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(after.Seconds()))))
	w.Header().Set("Retry-After-Ms", strconv.FormatInt(max(1, after.Milliseconds()), 10))
}

// addResult counts a job's result for its request's tenant: its engine
// time, its image, and its text's tokens, read from the result as its
// handler reads it (res.Body is wrapped to keep the bytes) and counted
// when the handler closes it.
func (c *caller) addResult(res *genq.ReceivedResult, model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.took.EngineSeconds += res.RunTime.Seconds()
	if c.took.Model == "" {
		c.took.Model = model
	}
	if strings.HasPrefix(res.ContentType, "image/") {
		c.took.Images++
		return
	}
	if strings.Contains(res.ContentType, "json") {
		res.Body = &meteredBody{ReadCloser: res.Body, c: c}
	}
}

// meteredBody keeps a text result's bytes as its reader reads them, and
// counts its tokens for the caller when closed.
type meteredBody struct {
	io.ReadCloser
	c    *caller
	buf  bytes.Buffer
	once sync.Once
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.buf.Len()+n <= genq.MaxTextResultBytes {
		b.buf.Write(p[:n])
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.once.Do(func() {
		u, ok := usageIn(b.buf.Bytes())
		if !ok {
			return
		}
		b.c.mu.Lock()
		defer b.c.mu.Unlock()
		b.c.took.PromptTokens += int64(u.PromptTokens)
		b.c.took.CachedTokens += int64(u.CachedTokens)
		b.c.took.CompletionTokens += int64(u.CompletionTokens)
	})
	return b.ReadCloser.Close()
}

// usageIn is a result's top-level usage, the JSON read only as far as
// it: a result past what meteredBody keeps (an embedding result of
// thousands of vectors, which writes its usage first) still counts.
func usageIn(data []byte) (genq.Usage, bool) {
	var u genq.Usage
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return u, false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return u, false
		}
		if key == "usage" {
			return u, dec.Decode(&u) == nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return u, false
		}
	}
	return u, false
}

// settle ends an admitted request: its usage goes to the tenant's metrics
// and, with its ticket, to the counters, what it took replacing what it
// reserved. It runs when the handler has answered.
func (s *Server) settle(ctx context.Context, c *caller, route string) {
	c.mu.Lock()
	admitted, queued, ticket, u := c.admitted, c.queued, c.ticket, c.took
	c.mu.Unlock()
	if !admitted {
		return
	}
	if queued {
		u = tenant.Usage{} // its work is counted when answered
	} else {
		u.Route, u.Requests = route, 1
		if u.Model == "" {
			u.Model = s.modelOf("", "")
		}
		s.metrics.countUsage(c.tenant.Name, u)
	}
	if ticket == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	took := tenant.Cost{Tokens: u.PromptTokens + u.CompletionTokens, Images: u.Images}
	if err := s.limiter.Settle(ctx, *ticket, took, u); err != nil {
		s.log.Warn("a request's usage was not counted", "tenant", c.tenant.Name, "route", route, "err", err)
	}
}

// routePattern is r's route pattern once routed, for the usage's route.
func routePattern(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		return rc.RoutePattern()
	}
	return "unmatched"
}

// reserve is the tokens a text request's jobs reserve on admission:
// each answer's most, its max_tokens or else the workers' cap.
func (s *Server) reserve(jobs []genq.Job) int64 {
	var n int64
	limit := s.workerLimits().MaxNewTokens
	for _, j := range jobs {
		if m := j.MaxNewTokens(); m > 0 {
			n += int64(m)
		} else {
			n += int64(limit)
		}
	}
	return n
}

// withShare gives the jobs queued with ctx its caller's tenant, whose
// waiting jobs the workers serve in turn with other tenants' by weight and
// tokens (docs/protocol.md §11). Without keys there are no tenants to
// share between, and every job stays on the shared subject, as before.
func (s *Server) withShare(ctx context.Context) context.Context {
	if c := callerOf(ctx); c != nil {
		return s.shareAs(ctx, c.tenant)
	}
	return ctx
}

// shareAs is withShare for work queued for tenant t outside its request
// (a batch's lines).
func (s *Server) shareAs(ctx context.Context, t tenant.Tenant) context.Context {
	if !s.keys.Required() || t.Name == "" {
		return ctx
	}
	return genq.WithShare(ctx, genq.Share{Tenant: t.Name, Weight: t.Weight, MaxTokens: s.workerLimits().MaxNewTokens})
}

// tenantNamed is the tenant of that name, as its keys say (a batch keeps
// only its tenant's name); weight 1 when no key names it any more.
func (s *Server) tenantNamed(name string) tenant.Tenant {
	for _, t := range s.keys.Tenants() {
		if t.Name == name {
			return t
		}
	}
	return tenant.Tenant{Name: name}
}

// tenantOf names r's tenant; "" outside a keyed route.
func tenantOf(r *http.Request) string {
	if c := callerOf(r.Context()); c != nil {
		return c.tenant.Name
	}
	return ""
}

// usageOf is what a request's answers took, as its answer's usage says
// (each prompt once, every choice's tokens), with their model.
func usageOf(results []openai.TextResult) tenant.Usage {
	u := openai.ChoicesUsage(results)
	out := tenant.Usage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens)}
	if d := u.PromptTokensDetails; d != nil {
		out.CachedTokens = int64(d.CachedTokens)
	}
	if len(results) > 0 {
		out.Model = results[0].Model
	}
	return out
}

// batchRoute and jobsRoute are the routes a batch's answers, and an
// asynchronous job's, are counted under.
const (
	batchRoute = "/v1/batches"
	jobsRoute  = "/v1/jobs"
)

// meterQueued counts an answered request of queued work (a batch's line,
// an asynchronous job) for the tenant that queued it, under route: on
// /metrics and in its counters, where its tokens count against the
// tenant's tpm and tpd (the work itself is not held back by them).
func (s *Server) meterQueued(ctx context.Context, name, route string, u tenant.Usage) {
	if name == "" {
		return
	}
	u.Route, u.Requests = route, 1
	s.metrics.countUsage(name, u)
	if s.limiter == nil {
		return
	}
	// The work is done and, for a job, its record already marked metered:
	// neither a caller who leaves nor the shorter bound of the look-up
	// that found the job (meterStored's) may cut the count short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	took := tenant.Cost{Tokens: u.PromptTokens + u.CompletionTokens, Images: u.Images}
	if err := s.limiter.Record(ctx, name, took, u); err != nil {
		s.log.Warn("queued work's usage was not counted", "tenant", name, "route", route, "err", err)
	}
}
