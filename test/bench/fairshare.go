package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

// The fair-share step (issue 54, item 3): two tenants, one sending ten
// times the other's load, in the interactive lane (chats) and the batch
// lane (POST /v1/jobs), on one api and one worker, then on two apis and
// two workers. Measured: the light tenant's p50 alone and beside the
// heavy one's load, and each tenant's share of the tokens served while
// both have jobs waiting, at weights 1:1 and 1:3.
//
// The workers run at their defaults for the text runtime (SLOTS,
// INTERACTIVE_SLOTS, BUSY_BATCH_SLOTS, TEXT_THREADS unset), as a fleet
// would: what was measured at 2 slots said little of a worker of 8. Only
// the answer is fixed (its length, EOS ignored, the seed), so that every
// job is the same work whatever the sampled text.
//
// The answer is 256 tokens by default (-fairshare-answer): a short one
// for a chat, and what makes a request the engine's work, as on a real
// model, where the fair share acts. The tiny model writes a token in
// about 0.1 ms, so at 16 tokens a request is about 4 ms, most of it the
// hops of HTTP, NATS and JetStream, and on two shared cores a tenant with
// ten in flight slows every hop of the other's (docs/benchmarks.md).
const (
	// fsLoad is the heavy tenant's clients, each with one request at a
	// time, against the light tenant's one.
	fsLoad = 10
	// fsRounds: the light tenant's runs alone and beside the heavy load
	// take turns, this many of each, so that the load of the shared
	// machine, which changes by the minute, weighs on both alike.
	fsRounds = 5
)

// fsKeys are the stack's keys: light and heavy of weight 1, and a light
// tenant of weight 3 for the weighted run.
var fsKeys = map[string]string{
	"light":  "k-light tenant=light weight=1",
	"heavy":  "k-heavy tenant=heavy weight=1",
	"light3": "k-light3 tenant=light3 weight=3",
}

type fairResult struct {
	rows []fairRow
	// slots and threads are what the workers' defaults came to on this
	// machine, as their logs say.
	slots, threads int
}

type fairRow struct {
	setup, lane   string
	alone, beside time.Duration // the light tenant's p50
	fifo          time.Duration // its p50 beside the heavy load, both without keys
	heavyRate     float64       // the heavy tenant's answers a second beside the light one
	// cpuAlone and cpuBeside: the CPU the stack used in the light tenant's
	// turns alone and beside the heavy one.
	cpuAlone, cpuBeside cpuSpan
	// waitAlone and waitBeside: the p50 of the light tenant's queue waits
	// (stored in the stream to started by a worker), as the workers log.
	waitAlone, waitBeside time.Duration
	// ranAlone and ranBeside: the p50 of the same jobs' time from started
	// to done on their worker (run, reply, ack).
	ranAlone, ranBeside time.Duration
	latencyN            int
	share1, share3      float64 // the light tenant's share of the tokens while both waited, weights 1:1 and 3:1
	tokens1, tokens3    [2]int64
	backlog             int
}

// fsStack is nats-server, the apis and the workers of one setup.
type fsStack struct {
	s    *localstack.Stack
	urls []string
	// fifo is an api of the same queue without keys: every job on the
	// shared subject, first in first out, for the baseline.
	fifo    string
	workers int
	// answer is every request's answer, in tokens.
	answer int
	extra  []*localstack.Proc // apis beside the stack's own
	done   *doneWatch
	stop   context.CancelFunc
}

// via is st with its requests sent to urls.
func (st *fsStack) via(urls ...string) *fsStack {
	c := *st
	c.urls = urls
	return &c
}

func (b *bench) fairShare(ctx context.Context) error {
	dir := filepath.Join(b.work, "fairshare")
	model := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B"}
	if err := model.WriteTinyModel(ctx); err != nil {
		return err
	}
	for _, n := range []int{1, 2} {
		st, err := b.startFair(ctx, model.ModelDir, n)
		if err != nil {
			return err
		}
		fr := &b.result.fair
		if fr.slots, fr.threads, err = workerSettings(st.s.Workers()[0].LogPath); err != nil {
			st.close()
			return err
		}
		fmt.Fprintf(b.out, "   %d worker(s): %d slots, %d compute threads each\n", n, fr.slots, fr.threads)
		for _, lane := range []string{"interactive", "batch"} {
			row, err := b.fairRow(ctx, st, lane, fmt.Sprintf("%d api, %d worker", n, n))
			if err != nil {
				st.close()
				return err
			}
			b.result.fair.rows = append(b.result.fair.rows, row)
			sa, ma := row.cpuAlone.cores()
			sb, mb := row.cpuBeside.cores()
			ea, wa := row.cpuAlone.engine()
			eb, wb := row.cpuBeside.engine()
			fmt.Fprintf(b.out, "   %s, %s: light p50 alone %s, beside %s (%.2fx; heavy %.0f answers/s), without keys %s (%.2fx); light's share 1:1 %.3f, 3:1 %.3f; "+
				"light's queue wait p50 alone %s, beside %s; started to done %s, %s; stack's cores alone %.2f, beside %.2f, machine busy %.2f, %.2f; "+
				"workers on a CPU %.2f, %.2f cores, waiting for one %.0f%%, %.0f%%; load %s\n",
				row.setup, lane, ms(row.alone), ms(row.beside), ratio(row.beside, row.alone), row.heavyRate, ms(row.fifo), ratio(row.fifo, row.alone), row.share1, row.share3,
				ms(row.waitAlone), ms(row.waitBeside), ms(row.ranAlone), ms(row.ranBeside), sa, sb, ma, mb, ea, eb, 100*wa, 100*wb, loadAverage())
		}
		st.close()
	}
	return nil
}

// startFair starts nats-server, n apis and n workers with the keys.
func (b *bench) startFair(ctx context.Context, modelDir string, n int) (*fsStack, error) {
	dir, err := os.MkdirTemp(b.work, "fair-")
	if err != nil {
		return nil, err
	}
	keys := filepath.Join(dir, "keys")
	var lines []string
	for _, l := range fsKeys {
		lines = append(lines, l)
	}
	if err := os.WriteFile(keys, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B", ModelDir: modelDir, Env: []string{
		fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", b.fsAnswer), "TEXT_IGNORE_EOS=true", "TEXT_SEED=42",
	}, APIEnv: []string{"API_KEYS_FILE=" + keys}}
	st := &fsStack{s: s, workers: n, answer: b.fsAnswer, stop: func() {}}
	err = s.StartNATS(ctx)
	if err == nil {
		err = s.StartAPI(ctx)
	}
	st.urls = []string{s.URL()}
	for i := 1; i <= n && err == nil; i++ {
		env := s.APIEnv
		if i == n {
			env = nil // the FIFO baseline's api, without keys
		}
		var p *localstack.Proc
		var url string
		p, url, err = startExtraAPI(ctx, s, i+1, env)
		if p != nil {
			st.extra = append(st.extra, p)
		}
		if i < n {
			st.urls = append(st.urls, url)
		} else {
			st.fifo = url
		}
	}
	for range n {
		if err == nil {
			_, err = s.StartWorker(ctx, true)
		}
	}
	if err != nil {
		st.close()
		return nil, err
	}
	st.done = newDoneWatch(func() []string {
		var logs []string
		for _, w := range s.Workers() {
			logs = append(logs, w.LogPath)
		}
		return logs
	})
	wctx, stop := context.WithCancel(ctx)
	st.stop = stop
	go st.done.run(wctx)
	return st, nil
}

// workerSettings is the slots and compute threads a worker's defaults
// came to, from its "text model ready" line: they resolve at its start,
// by the machine.
func workerSettings(logPath string) (slots, threads int, err error) {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return 0, 0, fmt.Errorf("worker's settings: %w", err)
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if !bytes.Contains(line, []byte(`"msg":"text model ready"`)) {
			continue
		}
		var l struct {
			Slots   int `json:"slots"`
			Threads int `json:"threads"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return 0, 0, fmt.Errorf("worker's settings in %s: %w", logPath, err)
		}
		return l.Slots, l.Threads, nil
	}
	return 0, 0, fmt.Errorf("worker's settings: %s has no \"text model ready\" line", logPath)
}

func (st *fsStack) close() {
	st.stop()
	for _, p := range st.extra {
		_ = p.Stop(10 * time.Second)
	}
	st.s.Close()
}

// startExtraAPI starts one more api of the stack, on ports of its own,
// with apiEnv.
func startExtraAPI(ctx context.Context, s *localstack.Stack, i int, apiEnv []string) (*localstack.Proc, string, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return nil, "", err
	}
	mport, err := localstack.FreePort()
	if err != nil {
		return nil, "", err
	}
	env := append([]string{"VARIANT=" + s.Variant, "NATS_URL=" + s.NATSURL(), "ADDR=127.0.0.1:" + strconv.Itoa(port),
		"METRICS_ADDR=127.0.0.1:" + strconv.Itoa(mport)}, s.Env...)
	p, err := localstack.Start(fmt.Sprintf("api-%d", i), s.Bin.API, nil, append(env, apiEnv...), s.Dir)
	if err != nil {
		return nil, "", err
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	return p, url, localstack.WaitHTTP(ctx, url+"/readiness")
}

// fairRow measures one lane of one setup.
func (b *bench) fairRow(ctx context.Context, st *fsStack, lane, setup string) (fairRow, error) {
	row := fairRow{setup: setup, lane: lane, latencyN: 40, backlog: 800}
	if b.quick {
		row.latencyN, row.backlog = 10, 400
	}
	run := st.chat
	if lane == "batch" {
		run = st.job
	}
	class := "jobs"
	if lane == "batch" {
		class = "batch"
	}
	var err error
	if err = st.lightAloneAndBeside(ctx, run, class, &row); err != nil {
		return row, err
	}
	fifo := st.via(st.fifo)
	frun := fifo.chat
	if lane == "batch" {
		frun = fifo.job
	}
	if row.fifo, err = fifo.lightP50(ctx, frun, row.latencyN, func(ctx context.Context) { fifo.heavyLoad(ctx, frun, nil) }); err != nil {
		return row, err
	}
	if row.share1, row.tokens1, err = st.shareWhileBothWait(ctx, run, class, "light", row.backlog); err != nil {
		return row, err
	}
	row.share3, row.tokens3, err = st.shareWhileBothWait(ctx, run, class, "light3", row.backlog)
	return row, err
}

// runFunc runs one request of tenant through api i and returns the tokens
// it took (prompt and answer) and when its answer came.
type runFunc func(ctx context.Context, tenant string, i int, prompt string) (tokens int64, done time.Time, err error)

// Prompts: the heavy tenant's are about four times as long, so a share by
// requests and one by tokens differ.
func promptOf(tenant string, n int) string {
	if tenant == "heavy" {
		return fmt.Sprintf("Tell the long story number %d of the queue that served everyone fairly, by tokens and not by requests, through every api and every worker of the fleet.", n)
	}
	return fmt.Sprintf("Say hi %d.", n)
}

// lightAloneAndBeside measures the light tenant's p50 alone and beside the
// heavy tenant's load, of row.latencyN requests each, in fsRounds turns of
// each; the heavy tenant's answers a second meanwhile (what keeping room
// for the light one costs it); and the CPU the stack used in each.
func (st *fsStack) lightAloneAndBeside(ctx context.Context, run runFunc, class string, row *fairRow) error {
	var a, b []time.Duration
	var answered atomic.Int64
	var heavyFor time.Duration
	heavy := func(ctx context.Context) {
		t0 := time.Now()
		st.heavyLoad(ctx, run, &answered)
		heavyFor += time.Since(t0)
	}
	k := max(row.latencyN/fsRounds, 1)
	var aloneSpans, besideSpans [][2]time.Time
	for range fsRounds {
		m := st.meterCPU()
		lat, err := st.lightLatencies(ctx, run, k, nil)
		if err != nil {
			return err
		}
		m.stop(&row.cpuAlone)
		aloneSpans = append(aloneSpans, [2]time.Time{m.t0, time.Now()})
		a = append(a, lat...)
		m = st.meterCPU()
		if lat, err = st.lightLatencies(ctx, run, k, heavy); err != nil {
			return err
		}
		m.stop(&row.cpuBeside)
		besideSpans = append(besideSpans, [2]time.Time{m.t0, time.Now()})
		b = append(b, lat...)
		if err := st.quiet(ctx, class); err != nil {
			return err
		}
	}
	row.alone, row.beside = p50(a), p50(b)
	row.waitAlone, row.ranAlone = st.done.onWorker("light", aloneSpans)
	row.waitBeside, row.ranBeside = st.done.onWorker("light", besideSpans)
	row.heavyRate = float64(answered.Load()) / heavyFor.Seconds()
	return nil
}

// p50 is the median of ds, or 0 when there are none (pct); it sorts ds.
func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return pct(ds, .5)
}

// quiet waits until the heavy tenant's jobs left queued are done, so that
// the next run alone is alone.
func (st *fsStack) quiet(ctx context.Context, class string) error {
	for _, subjects := range []string{"", ".>"} {
		if err := waitHeld(ctx, st.s.NATSURL(), class, subjects, func(n uint64) bool { return n == 0 }); err != nil {
			return err
		}
	}
	time.Sleep(100 * time.Millisecond) // the last ones pulled end
	return nil
}

// lightP50 is the p50 of n requests of the light tenant, one at a time,
// with beside running meanwhile when set.
func (st *fsStack) lightP50(ctx context.Context, run runFunc, n int, beside func(context.Context)) (time.Duration, error) {
	lat, err := st.lightLatencies(ctx, run, n, beside)
	if err != nil {
		return 0, err
	}
	return p50(lat), nil
}

// lightLatencies are the latencies of n requests of the light tenant, one
// at a time, with beside running meanwhile when set.
func (st *fsStack) lightLatencies(ctx context.Context, run runFunc, n int, beside func(context.Context)) ([]time.Duration, error) {
	bctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if beside != nil {
		wg.Go(func() { beside(bctx) })
		time.Sleep(500 * time.Millisecond) // the heavy tenant's queue fills
	}
	defer func() { stop(); wg.Wait() }()
	lat := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		_, done, err := run(ctx, "light", i, promptOf("light", i))
		if err != nil {
			return nil, err
		}
		lat = append(lat, done.Sub(t0))
	}
	return lat, nil
}

// heavyLoad keeps fsLoad requests of the heavy tenant in flight until ctx
// ends, counting those answered in answered when set.
func (st *fsStack) heavyLoad(ctx context.Context, run runFunc, answered *atomic.Int64) {
	var wg sync.WaitGroup
	for c := range fsLoad {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if _, _, err := run(ctx, "heavy", c+i, promptOf("heavy", i)); err == nil && answered != nil {
					answered.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// shareWhileBothWait queues backlog requests of the heavy tenant and a
// tenth of that of light at once, and returns light's share of the tokens
// answered until its last answer: while both had jobs waiting.
//
// The workers are stopped while the requests are queued, and started once
// the queue holds them all, so that both tenants wait from the first pick:
// queued at once through HTTP, they would trickle in at the rate the apis
// admit them.
func (st *fsStack) shareWhileBothWait(ctx context.Context, run runFunc, class, light string, backlog int) (float64, [2]int64, error) {
	// What the latency runs left (the heavy tenant's last asynchronous
	// jobs, queued still) would take turns too.
	for _, subjects := range []string{"", ".>"} {
		if err := waitHeld(ctx, st.s.NATSURL(), class, subjects, func(n uint64) bool { return n == 0 }); err != nil {
			return 0, [2]int64{}, err
		}
	}
	for _, w := range st.s.Workers() {
		if !w.Exited() {
			if err := w.Stop(10 * time.Second); err != nil {
				return 0, [2]int64{}, err
			}
		}
	}
	type answer struct {
		tokens int64
		done   time.Time
	}
	var mu sync.Mutex
	got := map[string][]answer{}
	var firstErr error
	var wg sync.WaitGroup
	for _, t := range []struct {
		name string
		n    int
	}{{"heavy", backlog}, {light, backlog / 10}} {
		for i := range t.n {
			wg.Go(func() {
				tokens, done, err := run(ctx, t.name, i, promptOf(t.name, i))
				mu.Lock()
				defer mu.Unlock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				got[t.name] = append(got[t.name], answer{tokens, done})
			})
		}
	}
	queued := backlog + backlog/10
	err := waitHeld(ctx, st.s.NATSURL(), class, ".t.*", func(n uint64) bool { return n >= uint64(queued) })
	for range st.workers {
		if err == nil {
			_, err = st.s.StartWorker(ctx, true)
		}
	}
	wg.Wait()
	if err != nil {
		return 0, [2]int64{}, err
	}
	if firstErr != nil {
		return 0, [2]int64{}, firstErr
	}
	var end time.Time
	var lightTokens, heavyTokens int64
	for _, a := range got[light] {
		lightTokens += a.tokens
		if a.done.After(end) {
			end = a.done
		}
	}
	for _, a := range got["heavy"] {
		if !a.done.After(end) {
			heavyTokens += a.tokens
		}
	}
	return float64(lightTokens) / float64(lightTokens+heavyTokens), [2]int64{lightTokens, heavyTokens}, nil
}

var fsClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}, Timeout: 5 * time.Minute}

// chatUsage is a chat completion's usage.
type chatUsage struct {
	Usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
}

func (u chatUsage) tokens() int64 { return u.Usage.PromptTokens + u.Usage.CompletionTokens }

// post sends body to url as tenant, and decodes the answer into out.
func post(ctx context.Context, url, tenant string, body any, want int, out any) error {
	data, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if err := send(req, tenant, want, out); err != nil {
		return fmt.Errorf("POST %s as %s: %w", url, tenant, err)
	}
	return nil
}

func chatBody(prompt string, answer int) map[string]any {
	return map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}, "max_tokens": answer}
}

// chat is an interactive request: a chat completion.
func (st *fsStack) chat(ctx context.Context, tenant string, i int, prompt string) (int64, time.Time, error) {
	var u chatUsage
	err := post(ctx, st.urls[i%len(st.urls)]+"/v1/chat/completions", tenant, chatBody(prompt, st.answer), http.StatusOK, &u)
	return u.tokens(), time.Now(), err
}

// job is a batch-lane request: an asynchronous job, done when its worker
// logs it done; its tokens are read from its result then.
func (st *fsStack) job(ctx context.Context, tenant string, i int, prompt string) (int64, time.Time, error) {
	var j struct {
		ID string `json:"id"`
	}
	url := st.urls[i%len(st.urls)]
	body := map[string]any{"type": "chat.completion", "request": chatBody(prompt, st.answer)}
	if err := post(ctx, url+"/v1/jobs", tenant, body, http.StatusAccepted, &j); err != nil {
		return 0, time.Time{}, err
	}
	at, err := st.done.wait(ctx, j.ID)
	if err != nil {
		return 0, at, err
	}
	var out struct {
		Status string    `json:"status"`
		Result chatUsage `json:"result"`
	}
	if err := get(ctx, url+"/v1/jobs/"+j.ID, tenant, &out); err != nil || out.Status != "succeeded" {
		return 0, at, fmt.Errorf("job %s: %s %v", j.ID, out.Status, err)
	}
	return out.Result.tokens(), at, nil
}

func get(ctx context.Context, url, tenant string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if err := send(req, tenant, http.StatusOK, out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// send sends req as tenant and decodes the answer into out when its
// status is want; another status is an error that quotes the answer.
func send(req *http.Request, tenant string, want int, out any) error {
	req.Header.Set("Authorization", "Bearer k-"+tenant)
	resp, err := fsClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// fairMarkdown is the fair-share step's section of docs/benchmarks.md.
func (b *bench) fairMarkdown() string {
	rows := b.result.fair.rows
	if len(rows) == 0 {
		return ""
	}
	var s strings.Builder
	fmt.Fprintf(&s, "`make bench` (or `go run ./test/bench -only fairshare`), commit `%s`, %s, load average %s, on a busy shared %d-core %s. "+
		"Each worker at its defaults for the text runtime (`SLOTS`, `INTERACTIVE_SLOTS`, `BUSY_BATCH_SLOTS`, `TEXT_THREADS` unset: %d slots, one kept for interactive jobs, %d compute thread(s) to start with), the tiny model, %d tokens an answer; keys of two tenants of weight 1 (light, heavy) and one of weight 3 (light3). "+
		"Latency: the light tenant sends %d requests one at a time alone, and as many while the heavy one keeps %d in flight (10× its load), in %d turns of each so that the machine's changing load weighs on both alike. "+
		"Share: the heavy tenant queues %d requests and the light one a tenth of that at once (the heavy one's prompts about four times as long); "+
		"the share is of the tokens (prompt and answer, as the answers' usage says) answered until the light tenant's last answer, while both waited. "+
		"Interactive: chat completions, answered; batch: `POST /v1/jobs`, from its `202` to its worker's log saying it done.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 UTC"), loadAverage(), runtime.NumCPU(), procfs.CPUName(),
		b.result.fair.slots, b.result.fair.threads, b.fsAnswer, rows[0].latencyN, fsLoad, fsRounds, rows[0].backlog)
	s.WriteString("| setup | lane | light p50 alone | light p50 beside heavy | ratio (bound 1.5×) | light's queue wait p50 alone / beside | its started to done alone / beside | heavy's answers/s beside | the stack's cores (machine busy) alone / beside | workers' cores, share of their runnable time waiting for a CPU, alone / beside | without keys: p50 beside heavy, ratio | light's token share, 1:1 (want 0.50) | tokens light / heavy | light3's share, 3:1 (want 0.75) | tokens light3 / heavy |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		sa, ma := r.cpuAlone.cores()
		sb, mb := r.cpuBeside.cores()
		ea, wa := r.cpuAlone.engine()
		eb, wb := r.cpuBeside.engine()
		fmt.Fprintf(&s, "| %s | %s | %s | %s | **%.2f×** | %s / %s | %s / %s | %.0f | %.2f (%.2f) / %.2f (%.2f) | %.2f, %.0f%% / %.2f, %.0f%% | %s, %.2f× | **%.3f** | %d / %d | **%.3f** | %d / %d |\n", r.setup, r.lane, ms(r.alone), ms(r.beside),
			ratio(r.beside, r.alone), ms(r.waitAlone), ms(r.waitBeside), ms(r.ranAlone), ms(r.ranBeside), r.heavyRate, sa, ma, sb, mb, ea, 100*wa, eb, 100*wb, ms(r.fifo), ratio(r.fifo, r.alone), r.share1, r.tokens1[0], r.tokens1[1], r.share3, r.tokens3[0], r.tokens3[1])
	}
	return s.String()
}

// waitHeld waits until the subjects of class ("jobs" or "batch") of
// variant B, with suffix (".t.*": the tenants'; "": the shared one; ".>":
// the tenants' and the workers'),
// hold a number of jobs for which enough holds.
func waitHeld(ctx context.Context, natsURL, class, suffix string, enough func(uint64) bool) error {
	js, done, err := localstack.JetStream(natsURL)
	if err != nil {
		return err
	}
	defer done()
	stream := map[string]string{"jobs": natsqueue.JobsStream, "batch": natsqueue.BatchStream}[class]
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var held uint64
		if s, err := js.Stream(ctx, stream); err == nil {
			if info, err := s.Info(ctx, jetstream.WithSubjectFilter("genq."+class+".B"+suffix)); err == nil {
				for _, k := range info.State.Subjects {
					held += k
				}
			}
		}
		if enough(held) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("genq.%s.B%s holds %d jobs: %w", class, suffix, held, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
