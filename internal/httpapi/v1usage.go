package httpapi

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
)

// GET /v1/usage: the tenants' usage by UTC day, from the counters every
// api shares, in the shape of OpenAI's organization usage API (a page of
// day buckets, each with its results) grouped by tenant, model and route.
// A key reads its own tenant's; an admin key (admin=true) every tenant's,
// or one's with ?tenant=.

// usagePage is the route's answer.
type usagePage struct {
	Object   string        `json:"object"` // page
	Data     []usageBucket `json:"data"`
	HasMore  bool          `json:"has_more"`
	NextPage *string       `json:"next_page"`
}

type usageBucket struct {
	Object    string        `json:"object"` // bucket
	StartTime int64         `json:"start_time"`
	EndTime   int64         `json:"end_time"`
	Results   []usageResult `json:"results"`
}

type usageResult struct {
	Object            string  `json:"object"` // genq.usage.result
	Tenant            string  `json:"tenant"`
	Model             string  `json:"model"`
	Route             string  `json:"route"`
	NumModelRequests  int64   `json:"num_model_requests"`
	InputTokens       int64   `json:"input_tokens"`
	InputCachedTokens int64   `json:"input_cached_tokens"`
	OutputTokens      int64   `json:"output_tokens"`
	Images            int64   `json:"images"`
	EngineSeconds     float64 `json:"engine_seconds"`
}

// maxUsageDays bounds the days of one usage request.
const maxUsageDays = 31

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r.Context())
	if s.limiter == nil || c == nil {
		writeV1Error(w, s.log, genq.Errorf(genq.Unavailable, "usage is kept in the tenants' counters, which this server has not"))
		return
	}
	from, to, err := usageRange(r, time.Now())
	if err != nil {
		writeV1Error(w, s.log, err)
		return
	}
	who := r.URL.Query().Get("tenant")
	open := !s.keys.Required()
	if !c.tenant.Admin && !open && who != "" && who != c.tenant.Name {
		writeV1Error(w, s.log, &genq.Error{Code: genq.NotFound, Field: "tenant", Message: "no usage of tenant " + strconv.Quote(who) + " for this key: a key reads its own tenant's usage, an admin key any tenant's"})
		return
	}
	if !c.tenant.Admin && !open {
		who = c.tenant.Name
	}
	s.flushUsage(r.Context())
	page := usagePage{Object: "page", Data: []usageBucket{}}
	for day := from; day.Before(to); day = day.AddDate(0, 0, 1) {
		b, err := s.usageBucket(r.Context(), day, who)
		if err != nil {
			writeV1Error(w, s.log, err)
			return
		}
		page.Data = append(page.Data, b)
	}
	writeJSON(w, http.StatusOK, page)
}

// flushUsage writes this api's usage of open tenants, which waits on it
// for a flush (tenant.Limiter), before it is read.
func (s *Server) flushUsage(ctx context.Context) {
	if err := s.limiter.Flush(ctx); err != nil {
		s.log.Warn("usage of tenants without limits not written before reading it", "err", err)
	}
}

// usageRange reads start_time and end_time (Unix seconds; by default
// today, UTC) into whole UTC days.
func usageRange(r *http.Request, now time.Time) (from, to time.Time, err error) {
	day := func(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
	from, to = day(now), now
	read := func(name string, dst *time.Time) error {
		v := r.URL.Query().Get(name)
		if v == "" {
			return nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return &genq.Error{Code: genq.Invalid, Field: name, Message: name + " must be a time in Unix seconds"}
		}
		*dst = time.Unix(n, 0)
		return nil
	}
	if err := read("start_time", &from); err != nil {
		return from, to, err
	}
	if err := read("end_time", &to); err != nil {
		return from, to, err
	}
	from = day(from)
	if !to.After(from) {
		return from, to, &genq.Error{Code: genq.Invalid, Field: "end_time", Message: "end_time must be after start_time"}
	}
	if to.Sub(from) > maxUsageDays*24*time.Hour {
		return from, to, &genq.Error{Code: genq.Invalid, Field: "end_time", Message: "a usage request spans " + strconv.Itoa(maxUsageDays) + " days at most"}
	}
	return from, to, nil
}

// usageBucket is day's usage of tenant who, or of every tenant.
func (s *Server) usageBucket(ctx context.Context, day time.Time, who string) (usageBucket, error) {
	b := usageBucket{Object: "bucket", StartTime: day.Unix(), EndTime: day.AddDate(0, 0, 1).Unix(), Results: []usageResult{}}
	names := []string{who}
	if who == "" {
		var err error
		if names, err = s.limiter.Tenants(ctx, day); err != nil {
			return b, err
		}
	}
	for _, name := range names {
		c, err := s.limiter.Day(ctx, name, day)
		if err != nil {
			return b, err
		}
		for _, u := range c.Usage {
			b.Results = append(b.Results, usageResult{Object: "genq.usage.result", Tenant: name, Model: u.Model, Route: u.Route,
				NumModelRequests: u.Requests, InputTokens: u.PromptTokens, InputCachedTokens: u.CachedTokens,
				OutputTokens: u.CompletionTokens, Images: u.Images, EngineSeconds: u.EngineSeconds})
		}
	}
	slices.SortFunc(b.Results, func(x, y usageResult) int {
		return cmp.Or(strings.Compare(x.Tenant, y.Tenant), strings.Compare(x.Model, y.Model), strings.Compare(x.Route, y.Route))
	})
	return b, nil
}

// tenantToday is a tenant's line in the queue view: its requests in
// flight over every api; its jobs waiting on its consumers and running on
// workers, over every queue and class; and its usage today.
type tenantToday struct {
	Tenant           string  `json:"tenant"`
	InFlight         int64   `json:"in_flight"`
	Waiting          uint64  `json:"waiting"`
	Running          uint64  `json:"running"`
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Images           int64   `json:"images"`
	EngineSeconds    float64 `json:"engine_seconds"`
}

// tenantsToday are the tenants the caller may see (its own; every one
// for an admin key or an api without keys) with their counts today.
func (s *Server) tenantsToday(ctx context.Context, c *caller) []tenantToday {
	out := []tenantToday{}
	if s.limiter == nil || c == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s.flushUsage(ctx)
	now := time.Now()
	names := []string{c.tenant.Name}
	if c.tenant.Admin || !s.keys.Required() {
		var err error
		if names, err = s.limiter.Tenants(ctx, now); err != nil {
			return out
		}
	}
	queued := s.queuedByTenant(ctx)
	if c.tenant.Admin || !s.keys.Required() {
		// A tenant with jobs queued before today has no counts today.
		for name := range queued {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range slices.Compact(names) {
		line := tenantToday{Tenant: name}
		if cs, err := s.limiter.Day(ctx, name, now); err == nil {
			u := cs.Total()
			line = tenantToday{Tenant: name, InFlight: cs.Running(now), Requests: u.Requests, PromptTokens: u.PromptTokens,
				CompletionTokens: u.CompletionTokens, Images: u.Images, EngineSeconds: u.EngineSeconds}
		} else if _, ok := queued[name]; !ok {
			continue
		}
		line.Waiting, line.Running = queued[name].Waiting, queued[name].Running
		out = append(out, line)
	}
	return out
}

// queuedByTenant sums each tenant's jobs waiting and running over every
// queue and class; none when they cannot be read.
func (s *Server) queuedByTenant(ctx context.Context) map[string]genq.TenantQueue {
	out := map[string]genq.TenantQueue{}
	if s.queues == nil {
		return out
	}
	all, err := s.queues.TenantQueues(ctx)
	if err != nil {
		s.log.Debug("the tenants' queues are unavailable to the queue view", "err", err)
		return out
	}
	for _, q := range all {
		sum := out[q.Tenant]
		sum.Waiting += q.Waiting
		sum.Running += q.Running
		out[q.Tenant] = sum
	}
	return out
}
