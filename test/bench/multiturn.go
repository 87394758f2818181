package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/test/localstack"
)

// The multi-turn workload (issue 23): conversations at once, turns each,
// about newTokens of user text a turn and answers of answerTokens, every
// turn sending the whole history. Texts are made of words, their length in
// characters scaled by the model's characters per token, which the step
// measures first (charsPerToken).
const (
	mtConversations = 4
	mtTurns         = 8
	mtNewTokens     = 150
	mtAnswerTokens  = 32
	mtSlots         = 8
	mtPrefillTokens = 1500
	// mtPrefillPrompts is how many long prompts each server is timed on: a
	// prefill takes seconds on this machine, and other work on it moves
	// single figures by a fifth.
	mtPrefillPrompts = 15
	// mtDecodeTokens is each answer's length in the decode step, which
	// runs at each of mtDecodeConcurrency for mtDecodeRounds rounds.
	mtDecodeTokens = 128
	mtDecodeRounds = 5
)

var mtDecodeConcurrency = []int{1, 4, 8}

// chatTarget is a server with an OpenAI chat route: genq's api or
// llama.cpp's llama-server.
type chatTarget struct {
	name   string
	url    string // base; the route is url + "/v1/chat/completions"
	client *http.Client
}

// newChatClient is a client without keep-alive: llama-server's HTTP
// library closes a connection after a few requests, and a request sent on
// one it is closing fails with EOF. Every server gets the same client.
func newChatClient() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// turnResult is one streamed chat answer as the client saw it.
type turnResult struct {
	ttft, total          time.Duration
	text                 string
	promptTokens, cached int
}

// mtRun is one pass of the multi-turn workload on one target.
type mtRun struct {
	target string
	wall   time.Duration
	turns  [mtTurns][]turnResult // by turn, one per conversation
}

func (r mtRun) ttft(turn int) time.Duration {
	var d []time.Duration
	for _, t := range r.turns[turn] {
		d = append(d, t.ttft)
	}
	slices.Sort(d)
	return d[len(d)/2]
}

func (r mtRun) meanOf(turn int, f func(turnResult) int) int {
	sum := 0
	for _, t := range r.turns[turn] {
		sum += f(t)
	}
	return sum / max(1, len(r.turns[turn]))
}

// multiTurnResult is what the multi-turn step measured.
type multiTurnResult struct {
	runs          []mtRun              // genq on, genq off, peer, in rounds
	uniqueRates   map[string][]float64 // tok/s of unique prompts, by cache setting
	uniqueHits    int                  // tokens reused beyond the shared prefix in the unique runs, cache on
	prefill       map[string][]time.Duration
	prefillTokens int
	decode        map[string]map[int][]float64 // tok/s by server and concurrency
	charsPerToken float64                      // of the words' text, on the model's tokenizer
	peer          string                       // how the peer was found, or why it was skipped
	model         string
}

var words = strings.Fields(`the a of to and in is it you that he was for on are with as his they at be this have from or one had by word but not what all were we when your can said there use an each which she do how their if will up other about out many then them these so some her would make like him into time has look two more write go see number no way could people my than first water been call who oil its now find long down day did get come made may part over new sound take only little work know place year live me back give most very after thing our just name good sentence man think say great where help through much before line right too mean old any same tell boy follow came want show also around form three small set put end does another well large must big even such because turn here why ask went men read need land different home us move try kind hand picture again change off play spell air away animal house point page letter mother answer found study still learn should world`)

// userText is about n characters of words, its own for each seed.
func userText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// multiTurn runs the workload on genq with the prefix cache on and off and
// on llama-server, on the same mid-model file, then unique prompts (no
// reuse) on genq with the cache on and off, and the time to first token
// of one long prompt on genq and the peer.
func (b *bench) multiTurn(ctx context.Context) error {
	dir := filepath.Join(b.work, "multiturn")
	model := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B"}
	if err := model.WriteTinyModel(ctx, "--size", "mid"); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(model.ModelDir, "*.gguf"))
	if len(files) != 1 {
		return fmt.Errorf("mid model: %d files in %s", len(files), model.ModelDir)
	}
	r := &b.result.multiTurn
	r.model = files[0]
	r.uniqueRates, r.prefill, r.decode = map[string][]float64{}, map[string][]time.Duration{}, map[string]map[int][]float64{}
	peer, why := findLlamaServer()
	r.peer = why
	if peer == "" {
		fmt.Fprintf(b.out, "   llama-server: skipped (%s)\n", why)
	}

	// Every server is up for the whole step and the workloads alternate
	// between them, so the machine's drift (it is shared) hits all alike.
	var targets []chatTarget
	for _, cache := range []string{"on", "off"} {
		t, stop, err := b.startGenq(ctx, model.ModelDir, cache)
		if err != nil {
			return err
		}
		defer stop()
		targets = append(targets, t)
	}
	if peer != "" {
		t, stop, err := startLlamaServer(ctx, peer, r.model, dir, b.mtThreads)
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
	r.charsPerToken = cpt
	chars := func(tokens int) int { return int(float64(tokens)*cpt + 0.5) }

	// One round: the cache-off run alone takes minutes on two cores.
	for round := range 1 {
		for _, t := range targets {
			run, err := runConversations(ctx, t, uint64(round), chars(mtNewTokens))
			if err != nil {
				return err
			}
			r.runs = append(r.runs, run)
			b.printRun(run)
		}
	}

	// Unique prompts: nothing to reuse beyond the shared system prefix.
	for round := range 5 {
		for _, t := range targets[:2] {
			rate, hits, err := uniquePrompts(ctx, t, uint64(100+round), chars(mtNewTokens))
			if err != nil {
				return err
			}
			r.uniqueRates[t.name] = append(r.uniqueRates[t.name], rate)
			if t == targets[0] {
				r.uniqueHits += hits
			}
			fmt.Fprintf(b.out, "   unique prompts, %s: %.0f tok/s\n", t.name, rate)
		}
	}

	// One long prompt alone, a new one each time: prefill, then the first
	// token. The first of each server warms it up; the servers take turns
	// going first, so neither always runs right after the other.
	prefillOn := []chatTarget{targets[0]}
	if peer != "" {
		prefillOn = append(prefillOn, targets[2])
	}
	for i := range mtPrefillPrompts + 1 {
		rng := rand.New(rand.NewPCG(uint64(1000+i), 1))
		text := userText(rng, chars(mtPrefillTokens))
		order := slices.Clone(prefillOn)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			res, err := chat(ctx, t, []map[string]string{{"role": "user", "content": text}}, 1)
			if err != nil {
				return err
			}
			if i > 0 {
				r.prefill[t.name] = append(r.prefill[t.name], res.ttft)
				r.prefillTokens = res.promptTokens
			}
		}
	}
	for _, t := range prefillOn {
		fmt.Fprintf(b.out, "   %s: one %d-token prompt, first token after %s\n", t.name, r.prefillTokens, r.prefill[t.name])
	}

	// Decoding: n short chats at once, each mtDecodeTokens long, on genq
	// (cache on) and the peer, the servers taking turns going first.
	for round := range mtDecodeRounds {
		for _, n := range mtDecodeConcurrency {
			order := slices.Clone(prefillOn)
			if (round+n)%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				rate, ttfts, err := decodeRate(ctx, t, n, uint64(2000+round*10+n))
				if err != nil {
					return err
				}
				if r.decode[t.name] == nil {
					r.decode[t.name] = map[int][]float64{}
				}
				r.decode[t.name][n] = append(r.decode[t.name][n], rate)
				fmt.Fprintf(b.out, "   decode, %s, %d at once: %.1f tok/s (first tokens after %s)\n", t.name, n, rate, durations(ttfts))
			}
		}
	}
	return nil
}

// decodeRate sends n one-message chats of a few words at once, each asking
// for exactly mtDecodeTokens tokens, and returns the answers' tokens per
// second of wall time, as llama.cpp's batched bench counts its decoding,
// and each answer's time to its first token.
func decodeRate(ctx context.Context, t chatTarget, n int, seed uint64) (float64, []time.Duration, error) {
	rng := rand.New(rand.NewPCG(seed, 3))
	type result struct {
		res turnResult
		err error
	}
	results := make(chan result, n)
	start := time.Now()
	for range n {
		text := userText(rng, 80)
		go func() {
			res, err := chat(ctx, t, []map[string]string{{"role": "user", "content": text}}, mtDecodeTokens)
			results <- result{res, err}
		}()
	}
	var ttfts []time.Duration
	for range n {
		r := <-results
		if r.err != nil {
			return 0, nil, fmt.Errorf("%s: %w", t.name, r.err)
		}
		ttfts = append(ttfts, r.res.ttft)
	}
	slices.Sort(ttfts)
	return float64(n*mtDecodeTokens) / time.Since(start).Seconds(), ttfts, nil
}

func (b *bench) printRun(run mtRun) {
	last := mtTurns - 1
	fmt.Fprintf(b.out, "   %s: %s for %d×%d turns; turn 8: TTFT %s, %d prompt tokens, %d cached; turn 1: TTFT %s\n",
		run.target, run.wall.Round(10*time.Millisecond), mtConversations, mtTurns, run.ttft(last).Round(time.Millisecond),
		run.meanOf(last, func(t turnResult) int { return t.promptTokens }), run.meanOf(last, func(t turnResult) int { return t.cached }),
		run.ttft(0).Round(time.Millisecond))
}

// startGenq starts nats-server, the api and one worker on the mid model
// in modelDir with the multi-turn settings.
func (b *bench) startGenq(ctx context.Context, modelDir, cache string) (chatTarget, func(), error) {
	dir, err := os.MkdirTemp(b.work, "multiturn-genq-")
	if err != nil {
		return chatTarget{}, nil, err
	}
	s := &localstack.Stack{Bin: b.bin, Dir: dir, Variant: "B", ModelDir: modelDir, Env: []string{
		fmt.Sprintf("SLOTS=%d", mtSlots), fmt.Sprintf("TEXT_THREADS=%d", b.mtThreads), "TEXT_PREFIX_CACHE=" + cache,
		fmt.Sprintf("TEXT_MAX_NEW_TOKENS=%d", mtDecodeTokens), "TEXT_CONTEXT_SIZE=2048",
	}}
	err = s.StartNATS(ctx)
	if err == nil {
		err = s.StartAPI(ctx)
	}
	if err == nil {
		_, err = s.StartWorker(ctx, true)
	}
	if err != nil {
		s.Close()
		return chatTarget{}, nil, err
	}
	return chatTarget{name: "genq, cache " + cache, url: s.URL(), client: newChatClient()}, s.Close, nil
}

// findLlamaServer is the peer's binary: $LLAMA_STOCK_SERVER (make
// engine-stock: the release without genq's patches, as users run it, so
// that what the patches cost shows), else $LLAMA_SERVER, else the one the
// engine build put beside the libraries genq loads (`make engine-tools`:
// $LLAMA_LIB_DIR, default lib/llama, links to the build's lib/, whose
// sibling bin/ holds llama-server); empty, with the reason, when there is
// none.
func findLlamaServer() (path, how string) {
	for _, env := range []string{"LLAMA_STOCK_SERVER", "LLAMA_SERVER"} {
		p := os.Getenv(env)
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return "", env + "=" + p + ": " + err.Error()
		}
		return p, "`" + env + "=" + p + "`"
	}
	lib := os.Getenv("LLAMA_LIB_DIR")
	if lib == "" {
		lib = filepath.Join("lib", "llama")
	}
	// The link is resolved first: lib/llama/.. is the clone's lib/, not the build.
	real, err := filepath.EvalSymlinks(lib)
	if err != nil {
		return "", "no llama-server: set LLAMA_SERVER, or run make engine-tools (" + err.Error() + ")"
	}
	p := filepath.Join(filepath.Dir(real), "bin", "llama-server")
	if _, err := os.Stat(p); err != nil {
		return "", "no llama-server beside the engine's libraries: set LLAMA_SERVER, or run make engine-tools (" + err.Error() + ")"
	}
	return p, "`" + p + "` (make engine-tools)"
}

// startLlamaServer starts llama-server on model with the same slots,
// threads and context per slot as genq, its prompt cache at its default
// (on).
func startLlamaServer(ctx context.Context, bin, model, dir string, threads int) (chatTarget, func(), error) {
	args := []string{"-m", model,
		"-t", strconv.Itoa(threads), "-tb", strconv.Itoa(threads), "-np", strconv.Itoa(mtSlots),
		"-c", strconv.Itoa(mtSlots * 2048), "-n", strconv.Itoa(mtDecodeTokens)}
	url, stop, _, err := startPeer(ctx, "llama-server", bin, dir, args)
	if err != nil {
		return chatTarget{}, nil, err
	}
	return chatTarget{name: "llama-server", url: url, client: newChatClient()}, stop, nil
}

// startPeer starts llama-server (bin) with args on a free loopback port,
// as process name, and waits until it is healthy: its URL, its stop and
// its process id.
func startPeer(ctx context.Context, name, bin, dir string, args []string) (string, func(), int, error) {
	port, err := localstack.FreePort()
	if err != nil {
		return "", nil, 0, err
	}
	args = append([]string{"--host", "127.0.0.1", "--port", strconv.Itoa(port)}, args...)
	p, err := localstack.Start(name, bin, args, nil, dir)
	if err != nil {
		return "", nil, 0, err
	}
	stop := func() { _ = p.Stop(10 * time.Second) }
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := localstack.WaitHTTP(wctx, url+"/health"); err != nil {
		stop()
		return "", nil, 0, fmt.Errorf("%w\n%s", err, p.Log())
	}
	return url, stop, p.PID(), nil
}

// charsPerToken measures the characters of words' text a token of t's
// model holds: the prompt counts of a long text and of one character, the
// chat template's tokens taken out.
func charsPerToken(ctx context.Context, t chatTarget) (float64, error) {
	text := userText(rand.New(rand.NewPCG(999, 1)), 1500)
	long, err := chat(ctx, t, []map[string]string{{"role": "user", "content": text}}, 1)
	if err != nil {
		return 0, err
	}
	short, err := chat(ctx, t, []map[string]string{{"role": "user", "content": "x"}}, 1)
	if err != nil {
		return 0, err
	}
	tokens := long.promptTokens - short.promptTokens + 1
	if tokens <= 0 {
		return 0, fmt.Errorf("%s: a text of %d characters counts %d prompt tokens, one character %d", t.name, len(text), long.promptTokens, short.promptTokens)
	}
	return float64(len(text)) / float64(tokens), nil
}

// runConversations runs the multi-turn workload on t.
func runConversations(ctx context.Context, t chatTarget, seed uint64, newChars int) (mtRun, error) {
	run := mtRun{target: t.name}
	var mu sync.Mutex
	errs := make(chan error, mtConversations)
	start := time.Now()
	for c := range mtConversations {
		go func() {
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			var history []map[string]string
			for turn := range mtTurns {
				history = append(history, map[string]string{"role": "user", "content": userText(rng, newChars)})
				res, err := chat(ctx, t, history, mtAnswerTokens)
				if err != nil {
					errs <- fmt.Errorf("%s, conversation %d, turn %d: %w", t.name, c, turn+1, err)
					return
				}
				history = append(history, map[string]string{"role": "assistant", "content": res.text})
				mu.Lock()
				run.turns[turn] = append(run.turns[turn], res)
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range mtConversations {
		if err := <-errs; err != nil {
			return run, err
		}
	}
	run.wall = time.Since(start)
	return run, nil
}

// uniquePrompts sends as many requests as the multi-turn run, each a new
// one-message chat of the same size as a turn, four at a time, and
// returns the answers' tokens per second and the tokens reused beyond the
// shared prefix (the least cached count seen is that prefix).
func uniquePrompts(ctx context.Context, t chatTarget, seed uint64, newChars int) (float64, int, error) {
	const n = mtConversations * mtTurns
	rng := rand.New(rand.NewPCG(seed, 7))
	texts := make([]string, n)
	for i := range texts {
		texts[i] = userText(rng, newChars)
	}
	results := make([]turnResult, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, mtConversations)
	start := time.Now()
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			res, err := chat(ctx, t, []map[string]string{{"role": "user", "content": texts[i]}}, mtAnswerTokens)
			results[i] = res
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return 0, 0, err
		}
	}
	rate := float64(n*mtAnswerTokens) / time.Since(start).Seconds()
	least := results[0].cached
	for _, r := range results {
		least = min(least, r.cached)
	}
	hits := 0
	for _, r := range results {
		hits += r.cached - least
	}
	return rate, hits, nil
}

// chat sends one streamed chat completion of exactly maxTokens tokens and
// reads it: the time to its first content, its text, and its usage.
func chat(ctx context.Context, t chatTarget, messages []map[string]string, maxTokens int) (turnResult, error) {
	body, _ := json.Marshal(map[string]any{
		"model": "mid", "messages": messages, "max_tokens": maxTokens, "ignore_eos": true,
		"temperature": 0, "stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return turnResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return turnResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, b.String())
	}
	var res turnResult
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens        int `json:"prompt_tokens"`
				PromptTokensDetails *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
			Timings *struct {
				CacheN int `json:"cache_n"`
			} `json:"timings"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return turnResult{}, fmt.Errorf("chunk %q: %w", data, err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" && res.ttft == 0 {
				res.ttft = time.Since(start)
			}
			text.WriteString(c.Delta.Content)
		}
		if u := chunk.Usage; u != nil {
			res.promptTokens = u.PromptTokens
			if u.PromptTokensDetails != nil {
				res.cached = u.PromptTokensDetails.CachedTokens
			}
		}
		if chunk.Timings != nil && res.cached == 0 {
			res.cached = chunk.Timings.CacheN
		}
	}
	if err := sc.Err(); err != nil {
		return turnResult{}, err
	}
	res.total = time.Since(start)
	if res.ttft == 0 {
		res.ttft = res.total // every piece was empty: the answer's end is its first text
	}
	res.text = text.String()
	return res, nil
}

// multiTurnMarkdown is the multi-turn section of docs/benchmarks.md.
func (b *bench) multiTurnMarkdown() string {
	r := b.result.multiTurn
	var s strings.Builder
	fmt.Fprintf(&s, "## Multi-turn chat and the prefix cache (measured by `make bench`)\n\n"+
		"Commit `%s`, %s, %d cores of %s, shared with other work (load average at the end: %s). "+
		"The mid model (BF16, `genqctl models tiny --variant B --size mid`), one file for every server. "+
		"%d conversations at once, %d turns each; a turn adds about %d tokens of user text (words, %.2f characters a token on this model, measured at the start) and asks for exactly %d answer tokens "+
		"(`ignore_eos`, greedy), streamed through `/v1/chat/completions`, the whole history sent every turn. "+
		"genq: api, NATS and one worker, `SLOTS=%d`, `TEXT_THREADS=%d`, `TEXT_CONTEXT_SIZE=2048`, `TEXT_PREFIX_CACHE` on or off. "+
		"llama-server: `-np %d -t %d -tb %d -c %d`, its prompt cache at its default (on). "+
		"Peer: %s. Time to first token (TTFT) is to the first chunk with text; medians over the conversations, then over the rounds.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), procfs.CPUName(), loadAverage(),
		mtConversations, mtTurns, mtNewTokens, r.charsPerToken, mtAnswerTokens, mtSlots, b.mtThreads, mtSlots, b.mtThreads, b.mtThreads, mtSlots*2048, r.peer)
	s.WriteString("| server | rounds | wall time, all turns | TTFT turn 1 | TTFT turn 8 | prompt tokens turn 8 | cached tokens turn 8 |\n|---|---|---|---|---|---|---|\n")
	byTarget := map[string][]mtRun{}
	var order []string
	for _, run := range r.runs {
		if _, ok := byTarget[run.target]; !ok {
			order = append(order, run.target)
		}
		byTarget[run.target] = append(byTarget[run.target], run)
	}
	ttft8 := map[string]time.Duration{}
	for _, t := range order {
		runs := byTarget[t]
		var wall, first, last []time.Duration
		for _, run := range runs {
			wall, first, last = append(wall, run.wall), append(first, run.ttft(0)), append(last, run.ttft(mtTurns-1))
		}
		ttft8[t] = median(last)
		lr := runs[len(runs)-1]
		fmt.Fprintf(&s, "| %s | %d | %s | %s | %s | %d | %d |\n", t, len(runs), median(wall).Round(10*time.Millisecond),
			ms(median(first)), ms(ttft8[t]),
			lr.meanOf(mtTurns-1, func(t turnResult) int { return t.promptTokens }), lr.meanOf(mtTurns-1, func(t turnResult) int { return t.cached }))
	}
	on, off, peer := ttft8["genq, cache on"], ttft8["genq, cache off"], ttft8["llama-server"]
	if on > 0 && off > 0 {
		fmt.Fprintf(&s, "\nTTFT at turn 8, cache on over cache off: **%.2f×**.", ratio(on, off))
	}
	if on > 0 && peer > 0 {
		fmt.Fprintf(&s, " genq (cache on) over llama-server: **%.2f×**.", ratio(on, peer))
	}
	s.WriteString("\n\n")
	if on, off := r.uniqueRates["genq, cache on"], r.uniqueRates["genq, cache off"]; len(on) > 0 {
		rOn, rOff := median(on), median(off)
		fmt.Fprintf(&s, "**Unique prompts** (nothing to reuse past the shared system prefix; %d tokens reused beyond it over all runs): %d one-message chats of the same size, 4 at a time, %d rounds alternating the servers: cache on %.0f tok/s, off %.0f tok/s (runs: on %s, off %s), on over off **%.3f×**.\n\n",
			r.uniqueHits, mtConversations*mtTurns, len(on), rOn, rOff, rates(on), rates(off), rOn/rOff)
	}
	if len(r.prefill) > 0 {
		fmt.Fprintf(&s, "**Prefill**: one %d-token prompt alone, one answer token, %d prompts after a warm-up, all different, each sent to every server, the servers taking turns going first. Time to first token:\n\n", r.prefillTokens, mtPrefillPrompts)
		s.WriteString("| server | median | fastest | every prompt |\n|---|---|---|---|\n")
		for _, t := range sortedKeys(r.prefill) {
			fmt.Fprintf(&s, "| %s | %s | %s | %s |\n", t, ms(median(r.prefill[t])), ms(slices.Min(r.prefill[t])), durations(r.prefill[t]))
		}
		if on, peer := r.prefill["genq, cache on"], r.prefill["llama-server"]; len(on) > 0 && len(peer) > 0 {
			fmt.Fprintf(&s, "\nllama-server over genq (time, so above 1 is genq faster): median **%.2f×**, fastest %.2f×.\n",
				ratio(median(peer), median(on)), ratio(slices.Min(peer), slices.Min(on)))
		}
	}
	if len(r.decode) > 0 {
		fmt.Fprintf(&s, "\n**Decoding**: n one-message chats of a few words at once, each exactly %d tokens (`ignore_eos`, greedy), streamed; tokens per second of wall time, median of %d rounds, the servers taking turns going first:\n\n", mtDecodeTokens, mtDecodeRounds)
		s.WriteString("| at once | genq tok/s | llama-server tok/s | genq over llama-server | rounds, genq | rounds, llama-server |\n|---|---|---|---|---|---|\n")
		on, peer := r.decode["genq, cache on"], r.decode["llama-server"]
		for _, n := range mtDecodeConcurrency {
			g, p := on[n], peer[n]
			if len(g) == 0 {
				continue
			}
			row := fmt.Sprintf("| %d | %.1f | ", n, median(g))
			if len(p) > 0 {
				row += fmt.Sprintf("%.1f | **%.2f×** | %s | %s |", median(p), median(g)/median(p), rates(g), rates(p))
			} else {
				row += fmt.Sprintf("– | – | %s | – |", rates(g))
			}
			s.WriteString(row + "\n")
		}
	}
	return s.String()
}

func rates(xs []float64) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, fmt.Sprintf("%.0f", x))
	}
	return strings.Join(parts, ", ")
}

func durations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, ms(d))
	}
	return strings.Join(parts, ", ")
}
