package tenant

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// Cost is what a request asks for on admission (its answer's most tokens,
// its images) or what it took when it is settled.
type Cost struct {
	Tokens int64
	Images int64
}

// Lease is one api's requests in flight for a tenant, counted until Until
// at most: the counts of an api that died without settling them lapse
// when its requests' deadlines would have.
type Lease struct {
	N     int64     `json:"n"`
	Until time.Time `json:"until"`
}

// Usage is what a tenant's requests took on one route and model.
type Usage struct {
	Route            string  `json:"route"`
	Model            string  `json:"model"`
	Requests         int64   `json:"requests"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CachedTokens     int64   `json:"cached_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Images           int64   `json:"images"`
	EngineSeconds    float64 `json:"engine_seconds"`
}

// Add adds o's counts to u's.
func (u *Usage) Add(o Usage) {
	u.Requests += o.Requests
	u.PromptTokens += o.PromptTokens
	u.CachedTokens += o.CachedTokens
	u.CompletionTokens += o.CompletionTokens
	u.Images += o.Images
	u.EngineSeconds += o.EngineSeconds
}

// Counters are a tenant's counts of one UTC day: its record in the
// counters bucket, which every api updates by compare-and-swap. The
// minute's window is the last minute a request was admitted or settled
// in. Tokens hold what admitted requests reserved until they are settled
// with what they took.
type Counters struct {
	Day            string           `json:"day"`    // 2006-01-02, UTC
	Minute         int64            `json:"minute"` // Unix minute of the minute's counts
	MinuteRequests int64            `json:"minute_requests"`
	MinuteTokens   int64            `json:"minute_tokens"`
	Tokens         int64            `json:"tokens"`
	Images         int64            `json:"images"`
	InFlight       map[string]Lease `json:"in_flight,omitempty"` // by api
	Usage          []Usage          `json:"usage,omitempty"`
}

// clone is a copy of c that shares nothing with it.
func (c Counters) clone() Counters {
	c.InFlight = maps.Clone(c.InFlight)
	c.Usage = slices.Clone(c.Usage)
	return c
}

// roll starts a new minute's counts when now is past the window's.
func (c *Counters) roll(now time.Time) {
	if m := unixMinute(now); m != c.Minute {
		c.Minute, c.MinuteRequests, c.MinuteTokens = m, 0, 0
	}
}

// Running is the requests in flight at now, over every api.
func (c Counters) Running(now time.Time) int64 {
	var n int64
	for _, l := range c.InFlight {
		if now.Before(l.Until) {
			n += l.N
		}
	}
	return n
}

// Total is the day's usage over every route and model.
func (c Counters) Total() Usage {
	var u Usage
	for _, x := range c.Usage {
		u.Add(x)
	}
	return u
}

func unixMinute(t time.Time) int64 { return t.Unix() / 60 }

// dayOf names t's UTC day as the counters do.
func dayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// untilMinuteEnd is the time left in now's minute, under a minute, as the
// SDKs only wait out a Retry-After shorter than a minute.
func untilMinuteEnd(now time.Time) time.Duration {
	d := time.Unix((unixMinute(now)+1)*60, 0).Sub(now)
	return min(max(d, time.Millisecond), time.Minute-time.Millisecond)
}

// untilDayEnd is the time left in now's UTC day.
func untilDayEnd(now time.Time) time.Duration {
	y, m, d := now.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Sub(now)
}

// Status is what the rate-limit headers say of a tenant after a decision:
// its requests' and tokens' limits, what is left, and when they reset.
// Zero limits are none.
type Status struct {
	RequestsLimit, RequestsRemaining int64
	RequestsReset                    time.Duration
	TokensLimit, TokensRemaining     int64
	TokensReset                      time.Duration
}

// status is what c leaves t at now: requests per minute, and tokens per
// minute, or per day when only those are bounded.
func (c Counters) status(t Tenant, now time.Time) Status {
	s := Status{RequestsLimit: t.RPM, RequestsReset: untilMinuteEnd(now)}
	s.RequestsRemaining = max(0, t.RPM-c.MinuteRequests)
	switch {
	case t.TPM > 0:
		s.TokensLimit, s.TokensRemaining, s.TokensReset = t.TPM, max(0, t.TPM-c.MinuteTokens), untilMinuteEnd(now)
	case t.TPD > 0:
		s.TokensLimit, s.TokensRemaining, s.TokensReset = t.TPD, max(0, t.TPD-c.Tokens), untilDayEnd(now)
	}
	return s
}

// Refusal is a request refused for a tenant's limit.
type Refusal struct {
	Tenant string
	// Limit is the limit's field in API_KEYS_FILE: rpm, tpm, tpd,
	// images_per_day or concurrency.
	Limit string
	Max   int64
	// RetryAfter is when the limit would let the request in.
	RetryAfter time.Duration
	Status     Status
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("rate limit reached on %s (%s): limit %d; try again in %s", r.Limit, limitNames[r.Limit], r.Max,
		r.RetryAfter.Round(time.Millisecond))
}

// Kind is what the limit counts: requests, tokens or images (OpenAI's
// error type).
func (r *Refusal) Kind() string {
	switch r.Limit {
	case "tpm", "tpd":
		return "tokens"
	case "images_per_day":
		return "images"
	}
	return "requests"
}

var limitNames = map[string]string{
	"rpm": "requests per minute", "tpm": "tokens per minute", "tpd": "tokens per day",
	"images_per_day": "images per day", "concurrency": "requests in flight",
}

// concurrencyRetry is the Retry-After of a request refused for the
// tenant's requests in flight: one of them may end at any time.
const concurrencyRetry = time.Second

// admit counts a request of cost for t at now on api, in flight until
// until, or says which limit refuses it. A limit of tokens or requests
// admits while its count is under it, so a day's tokens go over by one
// request's at most; images, known exactly, never go over.
func (c *Counters) admit(t Tenant, cost Cost, now time.Time, api string, until time.Time) *Refusal {
	c.roll(now)
	refuse := func(limit string, max int64, after time.Duration) *Refusal {
		return &Refusal{Tenant: t.Name, Limit: limit, Max: max, RetryAfter: after, Status: c.status(t, now)}
	}
	switch {
	case t.Concurrency > 0 && c.Running(now) >= t.Concurrency:
		return refuse("concurrency", t.Concurrency, concurrencyRetry)
	case t.RPM > 0 && c.MinuteRequests >= t.RPM:
		return refuse("rpm", t.RPM, untilMinuteEnd(now))
	case t.TPM > 0 && c.MinuteTokens >= t.TPM:
		return refuse("tpm", t.TPM, untilMinuteEnd(now))
	case t.TPD > 0 && c.Tokens >= t.TPD:
		return refuse("tpd", t.TPD, untilDayEnd(now))
	case t.ImagesPerDay > 0 && cost.Images > 0 && c.Images+cost.Images > t.ImagesPerDay:
		return refuse("images_per_day", t.ImagesPerDay, untilDayEnd(now))
	}
	c.MinuteRequests++
	c.MinuteTokens += cost.Tokens
	c.Tokens += cost.Tokens
	c.Images += cost.Images
	if c.InFlight == nil {
		c.InFlight = map[string]Lease{}
	}
	l := c.InFlight[api]
	if !now.Before(l.Until) {
		l.N = 0 // a lapsed lease's count is gone
	}
	l.N++
	if until.After(l.Until) {
		l.Until = until
	}
	c.InFlight[api] = l
	c.expire(now)
	return nil
}

// expire drops the leases that have lapsed.
func (c *Counters) expire(now time.Time) {
	maps.DeleteFunc(c.InFlight, func(_ string, l Lease) bool { return !now.Before(l.Until) })
}

// settle replaces what a request admitted in minute reserved with what it
// took, ends it in flight on api, and adds its usage. A minute's tokens
// are corrected only within the minute the request was admitted in: a
// later minute is charged what the request took beyond its reservation.
func (c *Counters) settle(reserved, took Cost, minute int64, now time.Time, api string, u Usage) {
	c.roll(now)
	delta := took.Tokens - reserved.Tokens
	c.Tokens = max(0, c.Tokens+delta)
	if c.Minute == minute || delta > 0 {
		c.MinuteTokens = max(0, c.MinuteTokens+delta)
	}
	c.Images = max(0, c.Images+took.Images-reserved.Images)
	if l, ok := c.InFlight[api]; ok {
		if l.N--; l.N <= 0 {
			delete(c.InFlight, api)
		} else {
			c.InFlight[api] = l
		}
	}
	c.expire(now)
	if u.Route != "" { // a request that only queued work has none
		c.addUsage(u)
	}
}

// record adds took and its usage, admitted nowhere, at now.
func (c *Counters) record(took Cost, now time.Time, us ...Usage) {
	c.roll(now)
	c.Tokens += took.Tokens
	c.MinuteTokens += took.Tokens
	c.Images += took.Images
	for _, u := range us {
		c.addUsage(u)
	}
}

// addUsage adds u to its route's and model's counts.
func (c *Counters) addUsage(u Usage) { c.Usage = addUsage(c.Usage, u) }

// addUsage adds u to the counts of its route and model in us.
func addUsage(us []Usage, u Usage) []Usage {
	for i := range us {
		if us[i].Route == u.Route && us[i].Model == u.Model {
			us[i].Add(u)
			return us
		}
	}
	return append(us, u)
}
