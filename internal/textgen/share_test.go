package textgen

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// TestStepShareSitsOutTenantsOverTheirShare: a tenant sits out a step only
// while another has work and it has used more than slack times the least
// one's tokens per weight, plus floor; counts halve every half-life.
func TestStepShareSitsOutTenantsOverTheirShare(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name    string
		used    map[string]int
		working map[string]float64
		at      time.Duration // after the counts
		want    []string
	}{
		{"a tenant alone never sits out", map[string]int{"heavy": 10000}, map[string]float64{"heavy": 1}, 0, nil},
		{"the one over its share sits out", map[string]int{"heavy": 10000, "light": 100}, map[string]float64{"heavy": 1, "light": 1}, 0, []string{"heavy"}},
		{"one not yet seen counts none", map[string]int{"heavy": 100}, map[string]float64{"heavy": 1, "light": 1}, 0, []string{"heavy"}},
		{"within the floor both step", map[string]int{"heavy": 60}, map[string]float64{"heavy": 1, "light": 1}, 0, nil},
		{"within the slack both step", map[string]int{"a": 1140, "b": 1000}, map[string]float64{"a": 1, "b": 1}, 0, nil},
		{"past the slack one sits out", map[string]int{"a": 1200, "b": 1000}, map[string]float64{"a": 1, "b": 1}, 0, []string{"a"}},
		{"weight divides the count", map[string]int{"big": 3000, "small": 1000}, map[string]float64{"big": 3, "small": 1}, 0, nil},
		{"below its weight's share", map[string]int{"big": 1000, "small": 1000}, map[string]float64{"big": 3, "small": 1}, 0, []string{"small"}},
		{"a weight of 0 counts as 1", map[string]int{"a": 1000, "b": 1000}, map[string]float64{"a": 0, "b": 1}, 0, nil},
		{"only tenants with work count", map[string]int{"heavy": 10000, "light": 100}, map[string]float64{"heavy": 1}, 0, nil},
		{"decay does not reorder", map[string]int{"heavy": 10000, "light": 100}, map[string]float64{"heavy": 1, "light": 1}, 3 * time.Second, []string{"heavy"}},
		{"counts decay below the floor", map[string]int{"heavy": 1000}, map[string]float64{"heavy": 1, "light": 1}, 5 * time.Second, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepShare()
			for tenant, n := range tt.used {
				s.use(tenant, n, t0)
			}
			got := s.sitOut(tt.working, t0.Add(tt.at))
			if len(got) != len(tt.want) {
				t.Fatalf("sat out %v, want %v", got, tt.want)
			}
			for _, w := range tt.want {
				if !got[w] {
					t.Fatalf("sat out %v, want %v", got, tt.want)
				}
			}
		})
	}
	var s *stepShare // off
	if got := s.sitOut(map[string]float64{"a": 1, "b": 1}, t0); got != nil {
		t.Fatalf("with the share off, %v sat out", got)
	}
}

// TestStepShareHalvesEveryHalfLife: what a tenant used counts half after
// a half-life, and tenants not seen for long are forgotten.
func TestStepShareHalvesEveryHalfLife(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := newStepShare()
	s.use("a", 1000, t0)
	if got := s.count("a", t0.Add(shareHalfLife)); math.Abs(got-500) > 1e-9 {
		t.Fatalf("after a half-life the count is %v, want 500", got)
	}
	s.use("a", 500, t0.Add(shareHalfLife))
	if got := s.count("a", t0.Add(3*shareHalfLife)); math.Abs(got-250) > 1e-9 {
		t.Fatalf("two half-lives after 1000 counted down to 500 and 500 more, the count is %v, want 250", got)
	}
	for i := range 20 {
		s.use(string(rune('b'+i)), 10, t0)
	}
	s.sitOut(map[string]float64{"a": 1, "b": 1}, t0.Add(100*shareHalfLife))
	if len(s.used) != 0 {
		t.Fatalf("after 100 half-lives %d tenants are still counted", len(s.used))
	}
}

// TestTenantOverItsShareSitsOutSteps: on the engine, a tenant that comes
// while another's sequences decode gets decoding steps of its own, and
// its long prompt's step carries the other's decoding tokens (choose's
// riders), its short one's not; with TEXT_TENANT_STEPS=off it shares
// every step. Every job is answered in full either way.
func TestTenantOverItsShareSitsOutSteps(t *testing.T) {
	for _, mode := range []string{"on", "off"} {
		t.Run(mode, func(t *testing.T) {
			b := openTiny(t, genq.VariantA, Config{MaxNewTokens: 400, Slots: 4, IgnoreEOS: true, TenantSteps: mode})
			if b.sched.shares != nil {
				// Counts that keep what they counted: a slow machine's
				// steps must not decide the verdict.
				b.sched.shares.halfLife = 1000 * time.Hour
			}
			var mu sync.Mutex
			steps := 0
			started := make(chan struct{})
			// Steps with the light tenant's row while heavy sequences decode,
			// and of those with its prompt, long or short, those with heavy
			// tokens too.
			alone, together := 0, 0
			var prefills, ridden [2]int // [long, short]
			b.sched.fault = func(st *step) error {
				mu.Lock()
				defer mu.Unlock()
				if steps++; steps == 200 {
					close(started)
				}
				heavy, light, short := 0, 0, 0
				for _, seq := range st.seqs {
					if seq.req.tenant == "light" {
						light++
						if len(seq.req.prompt) < rideAfter {
							short = 1
						}
					}
				}
				for _, seq := range b.sched.active {
					if seq.req.tenant == "heavy" && !seq.finished {
						heavy++
					}
				}
				inStep := 0
				for _, seq := range st.seqs {
					if seq.req.tenant == "heavy" {
						inStep++
					}
				}
				if light > 0 && heavy > 0 && !st.decodeOnly {
					prefills[short]++
					if inStep > 0 {
						ridden[short]++
					}
					return nil
				}
				if light > 0 && heavy > 0 {
					if inStep == 0 {
						alone++
					} else {
						together++
					}
				}
				return nil
			}
			job := func(tenant string, prompt, tokens int) error {
				ctx := genq.WithShare(context.Background(), genq.Share{Tenant: tenant, Weight: 1})
				ids := make([]int32, prompt)
				for i := range ids {
					ids[i] = 10 + int32(i*7+len(tenant))%90
				}
				res, err := b.generateJobStream(ctx, genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: ids, MaxTokens: tokens}}, nil)
				if err == nil && res.Tokens != tokens {
					t.Errorf("%s's answer has %d tokens, want %d", tenant, res.Tokens, tokens)
				}
				return err
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 3 {
				wg.Go(func() { errs <- job("heavy", 8, 400) })
			}
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("the heavy tenant's sequences did not step")
			}
			// A prompt of 300 tokens: a step of its own carries up to 37
			// decoding tokens beside it.
			if err := job("light", 300, 8); err != nil {
				t.Fatal(err)
			}
			// A prompt of 40 tokens is one step, and its own.
			if err := job("light", 40, 8); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the light tenant's decoding steps beside the heavy one's decoding: %d alone, %d shared; its prompts' steps, long and short: %v, %v with heavy tokens", alone, together, prefills, ridden)
			switch {
			case alone+together == 0 || prefills[0] == 0 || prefills[1] == 0:
				t.Fatal("the light tenant's prompts or answers never stepped while the heavy one decoded: the test proves nothing")
			case ridden[0] != prefills[0]:
				t.Fatalf("%d of the light tenant's %d long prompt's steps left out the heavy one's decoding tokens", prefills[0]-ridden[0], prefills[0])
			case mode == "on" && ridden[1] > 0:
				t.Fatal("the heavy tenant's decoding tokens rode the light one's short prompt's step")
			case mode == "on" && alone == 0:
				t.Fatal("the heavy tenant, far over its share, never sat out a step of the light one")
			case mode == "off" && alone > 0:
				t.Fatalf("with TEXT_TENANT_STEPS=off the heavy tenant sat out %d steps", alone)
			}
		})
	}
}
