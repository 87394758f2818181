package ggml

import (
	"sync/atomic"
	"time"
)

// schedulerStats are read by tests and benchmarks while the loop runs.
type schedulerStats struct {
	steps        atomic.Int64
	admitted     atomic.Int64
	maxSequences atomic.Int64 // most sequences one step carried
	mixedSteps   atomic.Int64 // narrowed steps that also brought whole rows
	tokens       atomic.Int64 // sampled
	all, decode  stepTimes    // every step; steps that carried no prompt token
}

// stepTimes add up where steps spent their time. Plan and finish are the
// host's work; compute is ggml's, with the copy of the results to the host.
type stepTimes struct {
	steps        atomic.Int64
	planNanos    atomic.Int64 // building graphs: the batch, the cache's mask, the graph
	computeNanos atomic.Int64 // ggml computing them
	finishNanos  atomic.Int64 // sampling and decoding
}

func (t *stepTimes) add(st *step) {
	t.steps.Add(1)
	t.planNanos.Add(int64(st.planTime))
	t.computeNanos.Add(int64(st.computeTime))
	t.finishNanos.Add(int64(st.finishTime))
}

// StepTimes are the mean times of a kind of step: the host's work
// (planning, finishing) and ggml's compute with the copy of its results.
type StepTimes struct {
	Steps                 int64
	Plan, Compute, Finish time.Duration
}

// Host is the host's share of a step: what does not shrink with a faster
// device.
func (t StepTimes) Host() time.Duration { return t.Plan + t.Finish }

func (t *stepTimes) means() StepTimes {
	n := t.steps.Load()
	if n == 0 {
		return StepTimes{}
	}
	mean := func(a *atomic.Int64) time.Duration { return time.Duration(a.Load() / n) }
	return StepTimes{Steps: n, Plan: mean(&t.planNanos), Compute: mean(&t.computeNanos), Finish: mean(&t.finishNanos)}
}

func (s *scheduler) record(st *step) {
	s.stats.all.add(st)
	if st.decodeOnly {
		s.stats.decode.add(st)
	}
	s.stats.tokens.Add(int64(len(st.draws)))
	if now := time.Now(); now.Sub(s.window.start) >= throughputLogEvery {
		s.logThroughput(now)
	}
}

// throughputLogEvery is how often a busy scheduler logs its throughput and
// where its steps spend their time, as vLLM logs its own every 10 s.
const throughputLogEvery = 10 * time.Second

// window is what the last throughput log line saw.
type window struct {
	start         time.Time
	tokens, steps int64
	plan, compute int64
	finish        int64
}

func (s *scheduler) logThroughput(now time.Time) {
	w := window{start: now, tokens: s.stats.tokens.Load(), steps: s.stats.all.steps.Load(),
		plan: s.stats.all.planNanos.Load(), compute: s.stats.all.computeNanos.Load(), finish: s.stats.all.finishNanos.Load()}
	prev := s.window
	s.window = w
	steps := w.steps - prev.steps
	if prev.start.IsZero() || steps == 0 {
		return
	}
	ms := func(n int64) float64 { return float64(n) / float64(steps) / 1e6 }
	active := 0
	for _, seq := range s.active {
		if !seq.finished {
			active++
		}
	}
	s.engine.log.Info("text throughput",
		"tokens_per_s", float64(w.tokens-prev.tokens)/now.Sub(prev.start).Seconds(),
		"steps", steps, "active", active, "waiting", len(s.waiting),
		"plan_ms", ms(w.plan-prev.plan), "compute_ms", ms(w.compute-prev.compute), "finish_ms", ms(w.finish-prev.finish))
}
