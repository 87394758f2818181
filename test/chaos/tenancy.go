package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/test/localstack"
)

// Every scenario runs with tenants and limits on (unless --keys=false):
// its api reads two tenants' keys from API_KEYS_FILE, every request it is
// sent carries one of the keys, the tenants in turn, and once the api has
// stopped each tenant's counters in GENQ_TENANTS must count every request
// the api admitted exactly once, none left running.

// chaosKeys are the tenants' keys: key, tenant, and the API_KEYS_FILE
// fields of its limits, far above any scenario's load, so that any
// refusal is the fault's; weights 1:3.
var chaosKeys = [][3]string{
	{"chaos-key-light-0001", "light", "rpm=100000 tpm=100000000 tpd=1000000000 concurrency=64 weight=1"},
	{"chaos-key-heavy-0002", "heavy", "rpm=100000 tpm=100000000 tpd=1000000000 concurrency=64 weight=3"},
}

// writeKeysFile writes chaosKeys as an API_KEYS_FILE in dir and returns
// its path.
func writeKeysFile(dir string) (string, error) {
	var lines []string
	for _, k := range chaosKeys {
		lines = append(lines, k[0]+" tenant="+k[1]+" "+k[2])
	}
	path := filepath.Join(dir, "keys")
	return path, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600)
}

// keyless runs a scenario without keys, whatever --keys says, and notes
// it: the routed scenarios', since a tenant's job is not routed by prefix
// (docs/protocol.md §11), so with keys they would test no routing.
func keyless(run func(context.Context, env) (localstack.Report, error)) func(context.Context, env) (localstack.Report, error) {
	return func(ctx context.Context, e env) (localstack.Report, error) {
		e.ten = newTenancy("")
		e.client = e.ten.client()
		rep, err := run(ctx, e)
		rep.Notes = append(rep.Notes, "without keys: a tenant's job is not routed by prefix")
		return rep, err
	}
}

// tally is what one tenant's requests got, as far as its counters go.
type tally struct {
	sent       int // calls to the api, of any route (a batch's polls too)
	admitted   int // answered as admitted, not for queued work
	unanswered int // no answer: admitted or not, the client cannot tell
	lines      int // queued work answered (a batch's lines), counted one each
}

// tenancy is one scenario's tenants: the keys its stacks' apis read, the
// client that sends every request as a tenant, what each tenant's
// requests got, and the check of the counters against it.
type tenancy struct {
	keysFile string // "" when tenants are off
	turn     atomic.Uint64

	mu      sync.Mutex
	tallies map[string]*tally
	checked bool
	note    string
	err     error
}

func newTenancy(keysFile string) *tenancy {
	return &tenancy{keysFile: keysFile, tallies: map[string]*tally{}}
}

func (t *tenancy) on() bool { return t.keysFile != "" }

// keyed gives s's api the tenants' keys and has s check the counters when
// it closes, once its api has settled every request.
func (t *tenancy) keyed(s *localstack.Stack) *localstack.Stack {
	if !t.on() {
		return s
	}
	s.APIEnv = append(s.APIEnv, "API_KEYS_FILE="+t.keysFile)
	s.BeforeNATSStops = func() { t.check(s.NATSURL()) }
	return s
}

// client sends every request as a tenant: with the key it carries, or else
// the next tenant's in turn.
func (t *tenancy) client() *http.Client {
	return &http.Client{Transport: keyedTransport{t: t, key: ""}}
}

// clientAs sends every request as tenant i of chaosKeys, and names it.
func (t *tenancy) clientAs(i int) (*http.Client, string) {
	k := chaosKeys[i%len(chaosKeys)]
	return &http.Client{Transport: keyedTransport{t: t, key: k[0]}}, k[1]
}

// answeredLines counts n lines of queued work answered for tenant name:
// the api counts each line as a request once it is answered.
func (t *tenancy) answeredLines(name string, n int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.of(name).lines += n
}

// of is name's tally; t.mu held.
func (t *tenancy) of(name string) *tally {
	if t.tallies[name] == nil {
		t.tallies[name] = &tally{}
	}
	return t.tallies[name]
}

// keyedTransport puts a tenant's key on each request that has none, and
// tallies what the request got.
type keyedTransport struct {
	t   *tenancy
	key string // the key of every request; "" for the tenants in turn
}

func (k keyedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if !k.t.on() {
		return http.DefaultTransport.RoundTrip(r)
	}
	name := tenantOfKey(r.Header.Get("Authorization"))
	if name == "" {
		key := k.key
		if key == "" {
			key = chaosKeys[int(k.t.turn.Add(1)%uint64(len(chaosKeys)))][0]
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+key)
		name = tenantOfKey("Bearer " + key)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	refused := err == nil && resp.StatusCode == http.StatusTooManyRequests && limitRefusal(resp)
	k.t.count(name, r, resp, err, refused)
	return resp, err
}

// tenantOfKey names the tenant of an Authorization header, or "".
func tenantOfKey(auth string) string {
	for _, k := range chaosKeys {
		if auth == "Bearer "+k[0] {
			return k[1]
		}
	}
	return ""
}

// count tallies one request of tenant name. The api admitted it when its
// answer carries the tenant's rate-limit headers, which admission sets,
// and is not a limit's refusal; a request that only queues work (a batch,
// an asynchronous job) is counted when its work is answered, not itself.
func (t *tenancy) count(name string, r *http.Request, resp *http.Response, err error, refused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.of(name)
	c.sent++
	switch {
	case resp == nil || err != nil:
		c.unanswered++
	case resp.Header.Get("X-Ratelimit-Limit-Requests") == "":
	case refused:
	case r.Method == http.MethodPost && (r.URL.Path == "/v1/batches" || r.URL.Path == "/v1/jobs"):
	default:
		c.admitted++
	}
}

// limitRefusal says whether a 429 is a tenant's limit refusing the
// request, not a full queue after admission. It reads the body, small
// JSON, and puts it back for the caller.
func limitRefusal(resp *http.Response) bool {
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return strings.Contains(string(b), "rate limit reached")
}

// check reads each tenant's counters of today from the counters' leader
// and compares their requests with what the tenant's requests got:
// admitted ≤ counted ≤ admitted + unanswered (a request the client gave
// up on may have been admitted), and none still counted as running.
func (t *tenancy) check(natsURL string) {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	note, err := t.compare(ctx, natsURL)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.checked, t.note, t.err = true, note, err
}

func (t *tenancy) compare(ctx context.Context, natsURL string) (string, error) {
	l, closeConn, err := leaderLimiter(ctx, natsURL)
	if err != nil {
		return "", fmt.Errorf("counters: %w", err)
	}
	defer closeConn()
	counters := make([]tenant.Counters, len(chaosKeys))
	for i, k := range chaosKeys {
		if counters[i], err = readToday(ctx, l, k[1]); err != nil {
			return "", fmt.Errorf("counters of %s: %w", k[1], err)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var notes, bad []string
	for i, k := range chaosKeys {
		c, n := counters[i], t.of(k[1])
		lo := n.admitted + n.lines
		got, running := c.Total().Requests, c.Running(time.Now())
		notes = append(notes, fmt.Sprintf("%s %d calls, %d admitted%s%s, %d counted", k[1], n.sent, n.admitted,
			plus(n.lines, "batch lines"), plus(n.unanswered, "unanswered"), got))
		if got < int64(lo) || got > int64(lo+n.unanswered) || running != 0 {
			bad = append(bad, fmt.Sprintf("%s counted %d, want %d to %d; %d still running", k[1], got, lo, lo+n.unanswered, running))
		}
	}
	note := "tenants: " + strings.Join(notes, "; ")
	if len(bad) > 0 {
		return note, fmt.Errorf("counters inconsistent: %s", strings.Join(bad, "; "))
	}
	return note, nil
}

// plus writes " + n what" when n is not 0.
func plus(n int, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" + %d %s", n, what)
}

// leaderLimiter is a limiter over the counters of the NATS at natsURL,
// read from the stream's leader, and what closes its connection.
func leaderLimiter(ctx context.Context, natsURL string) (*tenant.Limiter, func(), error) {
	st := natsqueue.DefaultSettings()
	st.Adopt = true
	conn, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: natsURL, Name: "chaos"}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return nil, nil, err
	}
	store, err := conn.TenantStore(ctx)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return tenant.NewLimiter(store, "chaos"), conn.Close, nil
}

// readToday reads tenant's counters of today, again while a node of a
// cluster that just came back leaves the counters without a leader.
func readToday(ctx context.Context, l *tenant.Limiter, name string) (tenant.Counters, error) {
	for {
		c, err := l.Today(ctx, name)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, errors.Join(err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// result is the check's note and verdict once the scenario has ended: a
// scenario that sent requests must have had its counters checked.
func (t *tenancy) result() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.on() {
		return "", nil
	}
	if !t.checked {
		sent := 0
		for _, n := range t.tallies {
			sent += n.sent
		}
		if sent > 0 {
			return "", errors.New("the tenants' counters were never checked: no keyed stack closed")
		}
		return "", nil
	}
	return t.note, t.err
}
