package httpapi

import (
	"cmp"
	"context"
	"embed"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/batchrun"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/openai"
)

// The web UI: a playground and a live queue view at /ui/, from files
// embedded in the binary (no CDN, no build step), and the one JSON route of
// its own, GET /ui/api/status, which reads what the api already knows.

//go:embed ui
var uiFiles embed.FS

// uiPolicy is the page's Content-Security-Policy: its own scripts and
// styles only, no inline code, nothing from elsewhere; images may be the
// data: and blob: URLs of generated pictures.
const uiPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Depths tells the queue's depth per lane (natsqueue.Conn).
type Depths interface {
	Depths(ctx context.Context, v genq.Variant) (interactive, batch uint64, err error)
}

func (s *Server) uiHandler() http.Handler {
	sub, _ := fs.Sub(uiFiles, "ui")
	files := http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", uiPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}

// recentJobs keeps the end time and latency of the jobs of the last
// minutes, for the queue view's charts.
type recentJobs struct {
	mu   sync.Mutex
	jobs []recentJob
}

type recentJob struct {
	at      time.Time
	latency time.Duration
	ok      bool
}

const recentWindow = 5 * time.Minute

func (r *recentJobs) add(at time.Time, latency time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.jobs = append(r.jobs, recentJob{at, latency, ok})
	cut := 0
	for cut < len(r.jobs) && at.Sub(r.jobs[cut].at) > recentWindow {
		cut++
	}
	r.jobs = r.jobs[cut:]
}

// statusBucket is one 10-second slice of the last minutes.
type statusBucket struct {
	At        int64   `json:"at"` // Unix seconds of its start
	Jobs      int     `json:"jobs"`
	Failed    int     `json:"failed"`
	PerSecond float64 `json:"per_second"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

func (r *recentJobs) buckets(now time.Time) []statusBucket {
	r.mu.Lock()
	jobs := slices.Clone(r.jobs)
	r.mu.Unlock()
	const width = 10 * time.Second
	n := int(recentWindow / width)
	start := now.Truncate(width).Add(-time.Duration(n-1) * width)
	lat := make([][]time.Duration, n)
	out := make([]statusBucket, n)
	for i := range out {
		out[i].At = start.Add(time.Duration(i) * width).Unix()
	}
	for _, j := range jobs {
		i := int(j.at.Sub(start) / width)
		if i < 0 || i >= n {
			continue
		}
		out[i].Jobs++
		if !j.ok {
			out[i].Failed++
		}
		lat[i] = append(lat[i], j.latency)
	}
	for i := range out {
		out[i].PerSecond = float64(out[i].Jobs) / width.Seconds()
		if len(lat[i]) > 0 {
			slices.Sort(lat[i])
			out[i].P50Ms = float64(lat[i][len(lat[i])/2]) / float64(time.Millisecond)
			out[i].P99Ms = float64(lat[i][(len(lat[i])-1)*99/100]) / float64(time.Millisecond)
		}
	}
	return out
}

type uiStatus struct {
	Variant genq.Variant     `json:"variant"`
	Kind    string           `json:"kind"` // text or image
	Workers []genq.Heartbeat `json:"workers"`
	// Models are the catalogue's, with where each is loaded: the
	// playgrounds' model pickers and the queue view's models. Empty with
	// no catalogue.
	Models      []openai.Model `json:"models"`
	Interactive *uint64        `json:"interactive_depth"`
	Batch       *uint64        `json:"batch_depth"`
	InFlight    int            `json:"in_flight"` // jobs the live workers run
	Recent      []statusBucket `json:"recent"`
	Batches     []openai.Batch `json:"batches"`
	Jobs        []jobStatus    `json:"jobs"` // the newest asynchronous jobs, without their results
	// Tenants are the tenants the key may see, with their requests in
	// flight and their usage today.
	Tenants []tenantToday `json:"tenants"`
}

func (s *Server) handleUIStatus(w http.ResponseWriter, r *http.Request) {
	kind := "text"
	if s.cfg.Variant.Kind() == genq.OutputImage {
		kind = "image"
	}
	st := uiStatus{Variant: s.cfg.Variant, Kind: kind, Workers: s.workers.Live(), Models: []openai.Model{}, Recent: s.recent.buckets(time.Now())}
	if s.namedModels() {
		// Every model's workers: one beat per model a worker serves.
		st.Workers, st.Models = s.fleet.Live(), s.catalogModels()
	}
	if st.Workers == nil {
		st.Workers = []genq.Heartbeat{}
	}
	slices.SortFunc(st.Workers, func(a, b genq.Heartbeat) int {
		return cmp.Or(strings.Compare(a.WorkerID, b.WorkerID), strings.Compare(a.Model, b.Model))
	})
	for _, hb := range st.Workers {
		st.InFlight += hb.Slots - hb.FreeSlots
	}
	if s.depths != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		if i, b, err := s.depths.Depths(ctx, s.cfg.Variant); err == nil {
			st.Interactive, st.Batch = &i, &b
		}
		cancel()
	}
	st.Batches = []openai.Batch{}
	if s.batches != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		if ids, err := s.batches.BatchIDs(ctx); err == nil {
			for _, id := range newest(ids, uiListed) {
				if rec, _, err := batchrun.Read(ctx, s.batches, id); err == nil {
					st.Batches = append(st.Batches, rec.Batch)
				}
			}
		}
		cancel()
		slices.SortFunc(st.Batches, func(a, b openai.Batch) int { return int(b.CreatedAt - a.CreatedAt) })
	}
	st.Jobs = s.recentAsyncJobs(r.Context())
	st.Tenants = s.tenantsToday(r.Context(), callerOf(r.Context()))
	writeJSON(w, http.StatusOK, st)
}

// recentAsyncJobs are the newest asynchronous jobs' statuses, results
// left out.
func (s *Server) recentAsyncJobs(ctx context.Context) []jobStatus {
	out := []jobStatus{}
	if s.async == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ids, err := s.async.JobIDs(ctx)
	if err != nil {
		return out
	}
	for _, id := range newest(ids, uiListed) {
		if st, _, err := s.jobStatus(ctx, id, false); err == nil {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b jobStatus) int { return int(b.Created - a.Created) })
	return out
}

// uiListed is how many asynchronous jobs and batches the queue view lists.
const uiListed = 20

// newest are the n greatest of ids: the api names jobs and batches by
// UUIDv7, whose order is their creation's, so the queue view, read every
// second, reads n records rather than every one kept.
func newest(ids []string, n int) []string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids[:min(len(ids), n)]
}
