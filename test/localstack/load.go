package localstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Outcome is what one request got.
type Outcome struct {
	Status  int // 0 when no answer came at all
	Err     error
	Latency time.Duration
	JobID   string
	Body    []byte
	Header  http.Header
}

// Request is one POST /generate to send.
type Request struct {
	Text string
	// Read, when set, consumes the body instead of io.ReadAll (a slow reader, say).
	Read func(io.Reader) ([]byte, error)
}

// Fire sends reqs to url's /generate with at most concurrency in flight and
// returns their outcomes in order. Each request has its own timeout.
func Fire(ctx context.Context, client *http.Client, url string, reqs []Request, concurrency int, timeout time.Duration) []Outcome {
	return FireEach(len(reqs), concurrency, func(i int) Outcome { return Generate(ctx, client, url, reqs[i], timeout) })
}

// FireEach runs send for each of n requests, at most concurrency at once,
// and returns their outcomes in order.
func FireEach(n, concurrency int, send func(i int) Outcome) []Outcome {
	out := make([]Outcome, n)
	sem := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = send(i)
		}()
	}
	wg.Wait()
	return out
}

// Generate sends one request.
func Generate(ctx context.Context, client *http.Client, url string, r Request, timeout time.Duration) Outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]string{"text": r.Text})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/generate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Outcome{Err: err, Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	read := r.Read
	if read == nil {
		read = io.ReadAll
	}
	b, err := read(resp.Body)
	return Outcome{Status: resp.StatusCode, Err: err, Latency: time.Since(start), JobID: resp.Header.Get("Genq-Job-Id"), Body: b, Header: resp.Header}
}

// Report sums up a scenario's outcomes.
type Report struct {
	Scenario   string
	Sent       int
	OK         int
	Errors     map[string]int // clean JSON errors, by status
	Lost       int            // no answer, or an answer that is not a clean JSON error
	Duplicated int            // jobs that ran to completion more than once
	P50, P99   time.Duration
	Notes      []string
}

// Summarize builds a report from outcomes and the workers' logs.
func Summarize(name string, outs []Outcome, workerLogs string) Report {
	r := Report{Scenario: name, Sent: len(outs), Errors: map[string]int{}}
	var lat []time.Duration
	for _, o := range outs {
		switch {
		case o.Status == http.StatusOK && o.Err == nil:
			r.OK++
			lat = append(lat, o.Latency)
		case o.Status != 0 && cleanError(o):
			r.Errors[fmt.Sprint(o.Status)]++
			lat = append(lat, o.Latency)
		default:
			if r.Lost == 0 {
				// What the first lost request got says where to look.
				r.Notes = append(r.Notes, fmt.Sprintf("first lost: job %s, status %d, %v, after %s", o.JobID, o.Status, o.Err, o.Latency.Round(time.Millisecond)))
			}
			r.Lost++
		}
	}
	slices.Sort(lat)
	r.P50, r.P99 = percentile(lat, 0.50), percentile(lat, 0.99)
	r.Duplicated = duplicatedRuns(workerLogs)
	return r
}

// cleanError reports whether o is a JSON error with a message: the seed
// routes' {"error":"…"}, or OpenAI's {"error":{"message":"…"}}.
func cleanError(o Outcome) bool {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if o.Err != nil || json.Unmarshal(o.Body, &e) != nil {
		return false
	}
	var msg string
	if json.Unmarshal(e.Error, &msg) == nil {
		return msg != ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(e.Error, &obj) == nil && obj.Message != ""
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

var (
	jobDone      = regexp.MustCompile(`"msg":"job done".*?"job_id":"([^"]+)"`)
	jobGenerated = regexp.MustCompile(`"msg":"job generated".*?"job_id":"([^"]+)"`)
)

// duplicatedRuns counts jobs that the workers' logs show answered more than
// once, or run by the model to a result more than once: a second run after
// a first one succeeded is a duplicate even when only one answer left. Runs
// cut short (a crash, a cancel, a failure that is retried) are not.
func duplicatedRuns(logs string) int {
	done, generated := map[string]int{}, map[string]int{}
	for _, m := range jobDone.FindAllStringSubmatch(logs, -1) {
		done[m[1]]++
	}
	for _, m := range jobGenerated.FindAllStringSubmatch(logs, -1) {
		generated[m[1]]++
	}
	n := 0
	for id := range generated {
		if max(done[id], generated[id]) > 1 {
			n++
		}
	}
	for id, c := range done {
		if _, ok := generated[id]; !ok && c > 1 {
			n++
		}
	}
	return n
}

// Table renders reports as a Markdown table.
func Table(reports []Report) string {
	var b strings.Builder
	b.WriteString("| scenario | sent | ok | clean errors | lost | duplicated | p50 | p99 | notes |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reports {
		var errs []string
		keys := make([]string, 0, len(r.Errors))
		for k := range r.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			errs = append(errs, fmt.Sprintf("%s×%d", k, r.Errors[k]))
		}
		if len(errs) == 0 {
			errs = []string{"none"}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %d | %d | %s | %s | %s |\n", r.Scenario, r.Sent, r.OK, strings.Join(errs, ", "),
			r.Lost, r.Duplicated, r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), strings.Join(r.Notes, "; "))
	}
	return b.String()
}
