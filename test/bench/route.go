package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

// The routing step (issue 23, point 4): the multi-turn workload on two
// workers behind one api, with ROUTE_BY_PREFIX on and off, so a turn
// lands on the worker that holds its conversation, or on either.
const (
	routeWorkers = 2
	routeSlots   = 4
	routeRounds  = 3
)

// routeResult is what the routing step measured: the runs of each
// setting, in the order they alternated.
type routeResult struct {
	runs []mtRun
}

// routing runs the multi-turn workload on two stacks of two workers
// each, one thread per worker, routing on and off, alternating rounds.
func (b *bench) routing(ctx context.Context) error {
	dir := filepath.Join(b.work, "route")
	model := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B"}
	if err := model.WriteTinyModel(ctx, "--size", "mid"); err != nil {
		return err
	}
	var targets []chatTarget
	for _, on := range []bool{true, false} {
		t, stop, err := b.startRouted(ctx, model.ModelDir, on)
		if err != nil {
			return err
		}
		defer stop()
		targets = append(targets, t)
	}
	cpt, err := charsPerToken(ctx, targets[1])
	if err != nil {
		return err
	}
	newChars := int(float64(mtNewTokens)*cpt + 0.5)
	for round := range routeRounds {
		for _, t := range targets {
			// A new seed each round: a conversation the cache holds from
			// an earlier round would be reused on any worker.
			run, err := runConversations(ctx, t, uint64(500+round), newChars)
			if err != nil {
				return err
			}
			b.result.route.runs = append(b.result.route.runs, run)
			b.printRun(run)
		}
	}
	return nil
}

// startRouted starts nats-server, the api and routeWorkers workers on the
// mid model in modelDir, with ROUTE_BY_PREFIX on or off.
func (b *bench) startRouted(ctx context.Context, modelDir string, on bool) (chatTarget, func(), error) {
	dir, err := os.MkdirTemp(b.work, "route-genq-")
	if err != nil {
		return chatTarget{}, nil, err
	}
	s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B", ModelDir: modelDir, Env: []string{
		fmt.Sprintf("ROUTE_BY_PREFIX=%t", on), fmt.Sprintf("SLOTS=%d", routeSlots), "TEXT_THREADS=1",
		fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", mtAnswerTokens), "TEXT_CONTEXT_SIZE=2048",
	}}
	err = s.StartNATS(ctx)
	if err == nil {
		err = s.StartAPI(ctx)
	}
	for range routeWorkers {
		if err == nil {
			_, err = s.StartWorker(ctx, true)
		}
	}
	if err != nil {
		s.Close()
		return chatTarget{}, nil, err
	}
	name := "routing off"
	if on {
		name = "routing on"
	}
	return chatTarget{name: name, url: s.URL(), client: newChatClient()}, s.Close, nil
}

// routeMarkdown is the routing step's section of docs/benchmarks.md.
func (b *bench) routeMarkdown() string {
	runs := b.result.route.runs
	var s strings.Builder
	fmt.Fprintf(&s, "## Routing by prefix across workers (measured by `go run ./test/bench -only route`)\n\n"+
		"Commit `%s`, %s, %d cores of %s, shared with other work (load average at the end: %s). "+
		"The multi-turn workload above (%d conversations at once, %d turns, about %d new tokens a turn, %d answer tokens, the mid model) "+
		"on one api and %d workers, `SLOTS=%d`, `TEXT_THREADS=1` each, prefix cache on, `ROUTE_BY_PREFIX` on or off; "+
		"the two stacks run side by side and the rounds alternate, a new set of conversations each round. "+
		"TTFT: median over the conversations, then over the rounds; cached tokens: mean over the conversations, median over the rounds.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), procfs.CPUName(), loadAverage(),
		mtConversations, mtTurns, mtNewTokens, mtAnswerTokens, routeWorkers, routeSlots)
	s.WriteString("| routing | rounds | wall time, all turns | TTFT turn 8 (each round) | TTFT turn 8 | prompt tokens turn 8 | cached tokens turn 8 (each round) | cached tokens turn 8 |\n|---|---|---|---|---|---|---|---|\n")
	ttft8 := map[string]time.Duration{}
	cached8 := map[string]int{}
	for _, name := range []string{"routing on", "routing off"} {
		var wall, last []time.Duration
		var cached []int
		prompt := 0
		for _, run := range runs {
			if run.target != name {
				continue
			}
			wall, last = append(wall, run.wall), append(last, run.ttft(mtTurns-1))
			cached = append(cached, run.meanOf(mtTurns-1, func(t turnResult) int { return t.cached }))
			prompt = run.meanOf(mtTurns-1, func(t turnResult) int { return t.promptTokens })
		}
		if len(last) == 0 {
			continue
		}
		ttft8[name], cached8[name] = median(last), median(cached)
		each := make([]string, len(last))
		for i, d := range last {
			each[i] = ms(d)
		}
		eachCached := make([]string, len(cached))
		for i, n := range cached {
			eachCached[i] = strconv.Itoa(n)
		}
		fmt.Fprintf(&s, "| %s | %d | %s | %s | %s | %d | %s | %d |\n", strings.TrimPrefix(name, "routing "), len(last),
			median(wall).Round(10*time.Millisecond), strings.Join(each, ", "), ms(ttft8[name]), prompt, strings.Join(eachCached, ", "), cached8[name])
	}
	if on, off := ttft8["routing on"], ttft8["routing off"]; on > 0 && off > 0 {
		fmt.Fprintf(&s, "\nTTFT at turn 8, routing on over off: **%.2f×**; cached tokens at turn 8: %d on, %d off.\n", ratio(on, off), cached8["routing on"], cached8["routing off"])
	}
	return s.String()
}
