package textgen

import (
	"sync/atomic"
	"time"
)

// schedulerStats are read by tests and benchmarks while the loop runs.
type schedulerStats struct {
	steps        atomic.Int64
	admitted     atomic.Int64
	maxSequences atomic.Int64 // most sequences one step carried
	tokens       atomic.Int64 // sampled
	all, decode  stepTimes    // every step; steps that carried no prompt token
}

// stepTimes add up where steps spent their time. Plan and finish are the
// host's work; compute is ggml's, with the copy of the results to the host.
type stepTimes struct {
	steps        atomic.Int64
	planNanos    atomic.Int64 // filling the batch
	computeNanos atomic.Int64 // the engine's Decode: its graph, its compute, the logits
	finishNanos  atomic.Int64 // sampling and decoding
}

// stepDurations are where one step spent its time.
type stepDurations struct {
	plan, compute, finish time.Duration
}

func (t *stepTimes) add(d stepDurations) {
	t.steps.Add(1)
	t.planNanos.Add(int64(d.plan))
	t.computeNanos.Add(int64(d.compute))
	t.finishNanos.Add(int64(d.finish))
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

// record counts a finished step: its times, and the tokens it sampled.
func (s *schedulerStats) record(took stepDurations, decodeOnly bool, sampled int) {
	s.all.add(took)
	if decodeOnly {
		s.decode.add(took)
	}
	s.tokens.Add(int64(sampled))
}

// throughputLogEvery is how often a busy scheduler logs its throughput and
// where its steps spend their time, as vLLM logs its own every 10 s.
const throughputLogEvery = 10 * time.Second

// window is what a throughput log line saw: the counters at its time.
type window struct {
	start         time.Time
	tokens, steps int64
	plan, compute int64
	finish        int64
}

func (s *schedulerStats) window(now time.Time) window {
	return window{start: now, tokens: s.tokens.Load(), steps: s.all.steps.Load(),
		plan: s.all.planNanos.Load(), compute: s.all.computeNanos.Load(), finish: s.all.finishNanos.Load()}
}

// throughput is what the steps between two windows did: tokens sampled per
// second, and the mean milliseconds a step spent planning, computing and
// finishing.
type throughput struct {
	tokensPerSecond             float64
	steps                       int64
	planMS, computeMS, finishMS float64
}

// since is the throughput from prev to w; false when prev is no window yet
// or no step ran in between.
func (w window) since(prev window) (throughput, bool) {
	steps := w.steps - prev.steps
	if prev.start.IsZero() || steps == 0 {
		return throughput{}, false
	}
	ms := func(n int64) float64 { return float64(n) / float64(steps) / 1e6 }
	return throughput{
		tokensPerSecond: float64(w.tokens-prev.tokens) / w.start.Sub(prev.start).Seconds(),
		steps:           steps,
		planMS:          ms(w.plan - prev.plan), computeMS: ms(w.compute - prev.compute), finishMS: ms(w.finish - prev.finish),
	}, true
}
