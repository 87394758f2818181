package main

import (
	"strings"
	"testing"
)

// TestUnansweredTrail: the jobs the api gave up on are named with the
// last thing a worker logged of them; answered jobs and other failures
// are not.
func TestUnansweredTrail(t *testing.T) {
	api := strings.Join([]string{
		`{"time":"2026-11-29T16:36:29.723Z","level":"INFO","msg":"generate failed","job_id":"j-timeout","code":"timeout"}`,
		`{"time":"2026-11-29T16:36:31.041Z","level":"INFO","msg":"generate failed","job_id":"j-gone","code":"canceled"}`,
		`{"time":"2026-11-29T16:36:31.500Z","level":"INFO","msg":"generate failed","job_id":"j-503","code":"unavailable"}`,
		`{"time":"2026-11-29T16:36:32.000Z","level":"INFO","msg":"generate done","job_id":"j-ok"}`,
		`not a JSON line`,
	}, "\n")
	workers := strings.Join([]string{
		`{"time":"2026-11-29T16:35:31.382Z","msg":"job started","worker_id":"worker-1","job_id":"j-timeout"}`,
		`{"time":"2026-11-29T16:35:43.706Z","msg":"job done","worker_id":"worker-1","job_id":"j-timeout"}`,
		`{"time":"2026-11-29T16:35:44.000Z","msg":"job done","worker_id":"worker-2","job_id":"j-ok"}`,
	}, "\n")
	cases := []struct {
		name         string
		api, workers string
		want         []string
		wantNot      []string
	}{
		{"nothing given up", `{"msg":"generate done","job_id":"j-ok"}`, workers, nil, nil},
		{"given up", api, workers,
			[]string{
				`job j-timeout given up (timeout) at 16:36:29.723, last logged by worker-1 "job done" at 16:35:43.706`,
				`job j-gone given up (canceled) at 16:36:31.041, no worker logged it`,
			},
			[]string{"j-503", "j-ok"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := unansweredTrail(c.api, c.workers)
			if c.want == nil && got != "" {
				t.Fatalf("trail %q, want none", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("trail %q lacks %q", got, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("trail %q names %q", got, w)
				}
			}
		})
	}
}

// TestUnansweredTrailBounded: past trailMost jobs the trail counts the rest.
func TestUnansweredTrailBounded(t *testing.T) {
	var api []string
	for range trailMost + 2 {
		api = append(api, `{"time":"2026-11-29T16:36:29Z","msg":"generate failed","job_id":"j","code":"timeout"}`)
	}
	got := unansweredTrail(strings.Join(api, "\n"), "")
	if n := strings.Count(got, "given up"); n != trailMost || !strings.HasSuffix(got, "; 2 more") {
		t.Fatalf("trail %q names %d jobs, want %d and \"2 more\"", got, n, trailMost)
	}
}
