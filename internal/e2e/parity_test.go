package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/textgen"
	"github.com/genq/genq/internal/tinygguf"
)

// stockLlamaServer is llama.cpp's llama-server built from the pinned
// release without genq's patches ($LLAMA_STOCK_SERVER, which the Makefile
// sets to make engine-stock's). Without it the test is skipped, unless
// GENQ_REQUIRE_PEER=1 (make test), where that is a failure. A build that
// carries patches is refused: the peer must be llama.cpp as released, so
// that a patch that changes what the engine computes shows as a parting.
func stockLlamaServer(t *testing.T) string {
	t.Helper()
	bin := peerBinary(t, "LLAMA_STOCK_SERVER", "the stock llama-server", "make engine-stock")
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		t.Fatal(err)
	}
	stamp := filepath.Join(filepath.Dir(real), "..", "lib", "genq-engine.json")
	data, err := os.ReadFile(stamp)
	if err != nil {
		t.Logf("%s has no build stamp beside it (%v): taken as a stock build", bin, err)
		return bin
	}
	var s struct {
		Tag     string   `json:"tag"`
		Patches []string `json:"patches"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", stamp, err)
	}
	if len(s.Patches) > 0 {
		t.Fatalf("LLAMA_STOCK_SERVER=%s is built with genq's patches %v: the parity peer must be the release as it is (make engine-stock)", bin, s.Patches)
	}
	t.Logf("peer: %s, llama.cpp %s without patches", bin, s.Tag)
	return bin
}

// TestGreedyParityWithStockLlamaServer: genq, through the api, NATS and a
// worker, and llama.cpp's own llama-server of the same pin, built as
// released (no genq patches), continue the same token-id prompts with the
// same 64 greedy tokens, on the mid model in BF16 (variant B) and in Q4_0
// (variant A), on this machine's CPU: the token ids are compared one by
// one, with no expected ids written down, so it holds on any CPU the two
// engines share.
//
// Both are asked the same thing. ignore_eos does not mean the same in the
// two: llama-server bans end-of-generation tokens from the draw (a logit
// bias of -inf), genq's (vLLM's) draws them and goes on past them. On a
// model with random weights an end-of-turn token is often the most likely
// one: [100 7 100 7 100 7 9] on the mid model in BF16 parted at its 11th
// token that way (docs/engine.md, "Greedy parity with llama-server").
// So both requests bias every control token by -100: neither engine may
// draw one, and what is left is the engines' arithmetic. (genq gives a
// control token no entry in a completion's logprobs, so the ids could not
// be compared through one anyway.)
//
// Where the two answers part, the test fails unless the parting is a tie:
// at that position the two best allowed tokens are within tieMargin of
// each other in genq's log-probabilities and in llama-server's (where it
// gives an entry there), and every token before it has the same
// log-probability on both sides within tieMargin. The kernels' rounding
// then decides; a real difference in what is computed does not pass.
func TestGreedyParityWithStockLlamaServer(t *testing.T) {
	bin := stockLlamaServer(t)
	for _, v := range []genq.Variant{genq.VariantB, genq.VariantA} {
		t.Run(string(v), func(t *testing.T) { greedyParity(t, bin, v) })
	}
}

// tieMargin is how close two log-probabilities are taken to be the same:
// llama.cpp's CPU kernels sum in orders that depend on the batch, which
// moves logits by about 1e-4 (textgen's tieLogprob).
const tieMargin = 1e-3

const (
	parityTokens  = 64
	parityThreads = 2
	// parityAlternatives is how many of the most likely tokens each side
	// lists per position: enough that two allowed ones remain once the
	// banned control tokens are left out.
	parityAlternatives = 8
)

func greedyParity(t *testing.T, bin string, v genq.Variant) {
	model := filepath.Join(t.TempDir(), tinygguf.FileName(v, "mid"))
	if err := tinygguf.Write(model, tinygguf.OptionsFor(v, "mid", 1)); err != nil {
		t.Fatal(err)
	}
	voc := readVocab(t, model)
	args := []string{"-t", strconv.Itoa(parityThreads), "-tb", strconv.Itoa(parityThreads), "-np", "1", "-c", "2048"}
	if v == genq.VariantA && cpuHasAMX() {
		// The release's AMX product dies on Q4_0 weights (docs/engine.md,
		// patch 0005); genq's build has no AMX code and takes the repacked
		// kernels. --no-repack takes neither: the generic kernels, which
		// sum in another order, so a parting at a tie may show here.
		args = append(args, "--no-repack")
		t.Log("this CPU has AMX: the stock llama-server runs Q4_0 with --no-repack")
	}
	peer := startLlamaServer(t, bin, model, args...)

	s := newStack(t, stackOptions{variant: v, http: httpapi.Config{JobTimeout: 3 * time.Minute}})
	b, err := textgen.Open(context.Background(), textgen.Config{ModelFile: model, Slots: 2, Threads: parityThreads,
		ContextSize: 2048, MaxNewTokens: parityTokens}, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	s.startWorkerBackend(b)
	s.waitLive(1)

	for i, prompt := range parityPrompts(voc) {
		what := fmt.Sprintf("prompt %d (%d tokens, %v…)", i, len(prompt), prompt[:min(len(prompt), 8)])
		want := peerGreedy(t, peer, voc, prompt)
		got := genqGreedy(t, s.api.URL, voc, prompt)
		compareGreedy(t, what, voc, got, want)
	}
}

// cpuHasAMX reports whether the CPU has AMX tiles for int8 (Linux's
// amx_int8 flag).
func cpuHasAMX() bool {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(info)) {
		if strings.HasPrefix(line, "flags") && slices.Contains(strings.Fields(line), "amx_int8") {
			return true
		}
	}
	return false
}

// parityPrompts are the prompts compared, token ids of the mid model's
// vocabulary, each with a first token of its own so that genq's prefix
// cache finds nothing of one in another: the one that parted; a BOS and
// text; a single token; the merged tokens; and 600 tokens, which both
// engines compute in two parts of 512 and 88 (genq's TEXT_BATCH_SIZE,
// llama-server's -ub).
func parityPrompts(voc vocabulary) [][]int32 {
	bos := voc.ids["<|begin_of_text|>"]
	text := []int32{bos}
	for _, c := range []byte("The quick brown fox jumps over the lazy dog.") {
		text = append(text, int32(c))
	}
	var merged []int32
	for id := range voc.tokens {
		if len(voc.tokens[id]) > 1 && !voc.control[id] {
			merged = append(merged, int32(id))
		}
	}
	long := make([]int32, 600)
	for i := range long {
		long[i] = int32(32 + (i*37+11)%90) // printable ASCII, no pattern a few tokens long
	}
	return [][]int32{{100, 7, 100, 7, 100, 7, 9}, text, {9}, merged, long}
}

// vocabulary is the model's tokens as the test reads them from its file:
// each token's bytes (a control token's text), and which are control
// tokens.
type vocabulary struct {
	tokens  [][]byte
	control []bool
	ids     map[string]int32 // bytes (control tokens: their text) to id
}

// readVocab reads the byte-level BPE vocabulary of a model tinygguf wrote.
func readVocab(t *testing.T, path string) vocabulary {
	t.Helper()
	file := readGGUF(t, path)
	tokens, ok1 := file.Value("tokenizer.ggml.tokens").([]string)
	types, ok2 := file.Value("tokenizer.ggml.token_type").([]int32)
	if !ok1 || !ok2 || len(tokens) != len(types) {
		t.Fatalf("%s: no vocabulary the test can read", path)
	}
	byteOf := map[rune]byte{}
	for b, r := range tinygguf.ByteLevelAlphabet() {
		byteOf[[]rune(r)[0]] = byte(b)
	}
	const controlType = 3 // llama_token_type's LLAMA_TOKEN_TYPE_CONTROL
	v := vocabulary{ids: map[string]int32{}}
	for id, tok := range tokens {
		var bs []byte
		control := types[id] == controlType
		if control {
			bs = []byte(tok)
		} else {
			for _, r := range tok {
				b, ok := byteOf[r]
				if !ok {
					t.Fatalf("%s: token %d (%q) is not byte-level", path, id, tok)
				}
				bs = append(bs, b)
			}
		}
		if _, dup := v.ids[string(bs)]; dup {
			t.Fatalf("%s: two tokens read %q: their ids could not be told apart", path, bs)
		}
		v.tokens, v.control = append(v.tokens, bs), append(v.control, control)
		v.ids[string(bs)] = int32(id)
	}
	return v
}

// banned is the logit bias both engines get: -100 on every control
// token, end-of-generation ones included.
func (v vocabulary) banned() map[int32]float64 {
	bias := map[int32]float64{}
	for id, c := range v.control {
		if c {
			bias[int32(id)] = -100
		}
	}
	return bias
}

// greedyAnswer is one engine's answer: its token ids, and for the
// positions it gave an entry for, the log-probabilities of the sampled
// token and of the most likely ones, under the model's raw logits.
type greedyAnswer struct {
	ids     []int32
	entries map[int]positionLogprobs
}

type positionLogprobs struct {
	logprob float64
	top     map[int32]float64
}

// margin is the gap between the two most likely tokens that are not
// banned at this position, and whether two were listed.
func (p positionLogprobs) margin(banned map[int32]float64) (float64, bool) {
	var lps []float64
	for id, lp := range p.top {
		if _, ban := banned[id]; !ban {
			lps = append(lps, lp)
		}
	}
	if len(lps) < 2 {
		return 0, false
	}
	slices.Sort(lps)
	return lps[len(lps)-1] - lps[len(lps)-2], true
}

// peerGreedy asks llama-server's /completion for the greedy continuation
// of prompt, its token ids (return_tokens) and its probabilities (n_probs).
// It gives no probability entry for a token after which the text ends in
// an incomplete UTF-8 character (tools/server: validate_utf8), so the
// entries are put back at their positions the same way.
func peerGreedy(t *testing.T, url string, voc vocabulary, prompt []int32) greedyAnswer {
	t.Helper()
	var bias [][2]float64
	for id, b := range voc.banned() {
		bias = append(bias, [2]float64{float64(id), b})
	}
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": parityTokens, "temperature": 0, "ignore_eos": true,
		"cache_prompt": false, "return_tokens": true, "n_probs": parityAlternatives, "logit_bias": bias})
	var out struct {
		Tokens []int32 `json:"tokens"`
		Probs  []struct {
			ID      int32   `json:"id"`
			Logprob float64 `json:"logprob"`
			Top     []struct {
				ID      int32   `json:"id"`
				Logprob float64 `json:"logprob"`
			} `json:"top_logprobs"`
		} `json:"completion_probabilities"`
	}
	postJSON(t, url+"/completion", body, &out)
	a := greedyAnswer{ids: out.Tokens, entries: map[int]positionLogprobs{}}
	var text []byte
	e := 0
	for i, id := range out.Tokens {
		text = append(text, voc.tokens[id]...)
		if incompleteUTF8(text) || e >= len(out.Probs) {
			continue
		}
		p := out.Probs[e]
		e++
		if p.ID != id {
			t.Fatalf("llama-server: probability entry %d is for token %d, its token %d is %d", e-1, p.ID, i, id)
		}
		lp := positionLogprobs{logprob: p.Logprob, top: map[int32]float64{}}
		for _, a := range p.Top {
			lp.top[a.ID] = a.Logprob
		}
		a.entries[i] = lp
	}
	return a
}

// incompleteUTF8 is llama-server's validate_utf8 < len: text ends in the
// first bytes of a character whose lead byte says it has more.
func incompleteUTF8(text []byte) bool {
	for i := 1; i <= 4 && i <= len(text); i++ {
		c := text[len(text)-i]
		switch {
		case c&0xE0 == 0xC0 && i < 2, c&0xF0 == 0xE0 && i < 3, c&0xF8 == 0xF0 && i < 4:
			return true
		}
	}
	return false
}

// genqGreedy asks genq's /v1/completions for the greedy continuation of
// prompt with the same bias, and reads its token ids back from the legacy
// log-probabilities, an entry per token (the vocabulary's tokens all read
// differently, and no control token can be drawn).
func genqGreedy(t *testing.T, url string, voc vocabulary, prompt []int32) greedyAnswer {
	t.Helper()
	bias := map[string]float64{}
	for id, b := range voc.banned() {
		bias[strconv.Itoa(int(id))] = b
	}
	body, _ := json.Marshal(map[string]any{"model": "mid", "prompt": prompt, "max_tokens": parityTokens, "temperature": 0,
		"ignore_eos": true, "logit_bias": bias, "logprobs": parityAlternatives})
	var out struct {
		Choices []struct {
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	postJSON(t, url+"/v1/completions", body, &out)
	if len(out.Choices) != 1 {
		t.Fatalf("genq: %d choices", len(out.Choices))
	}
	lp := out.Choices[0].Logprobs
	if n := out.Usage.CompletionTokens; n != len(lp.Tokens) {
		t.Fatalf("genq: %d tokens generated, %d logprob entries", n, len(lp.Tokens))
	}
	id := func(tok string) int32 {
		i, ok := voc.ids[string(legacyBytes(t, tok))]
		if !ok {
			t.Fatalf("genq: token %q is none of the vocabulary's", tok)
		}
		return i
	}
	a := greedyAnswer{entries: map[int]positionLogprobs{}}
	for i, tok := range lp.Tokens {
		a.ids = append(a.ids, id(tok))
		p := positionLogprobs{logprob: lp.TokenLogprobs[i], top: map[int32]float64{}}
		for alt, l := range lp.TopLogprobs[i] {
			p.top[id(alt)] = l
		}
		a.entries[i] = p
	}
	return a
}

// legacyBytes are the bytes of a token as the legacy completions write
// it: its text, or "bytes:" and \xNN for each byte of one that is not
// UTF-8.
func legacyBytes(t *testing.T, tok string) []byte {
	hex, ok := strings.CutPrefix(tok, "bytes:")
	if !ok {
		return []byte(tok)
	}
	var out []byte
	for part := range strings.SplitSeq(hex, `\x`) {
		if part == "" {
			continue
		}
		b, err := strconv.ParseUint(part, 16, 8)
		if err != nil {
			t.Fatalf("token %q: %v", tok, err)
		}
		out = append(out, byte(b))
	}
	return out
}

func postJSON(t *testing.T, url string, body []byte, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b.String())
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// compareGreedy holds genq's answer to llama-server's (parityDiff).
func compareGreedy(t *testing.T, what string, voc vocabulary, got, want greedyAnswer) {
	t.Helper()
	problems, note := parityDiff(voc.banned(), got, want)
	for _, p := range problems {
		t.Errorf("%s: %s", what, p)
	}
	if note != "" {
		t.Logf("%s: %s", what, note)
	}
}

// parityDiff holds two greedy answers to each other: the same 64 ids, or
// the same ids up to a position where both sides' two best tokens that
// are not banned are within tieMargin; every token before the parting
// (all of them when none) of the same log-probability on both sides
// within tieMargin, where want has an entry for it. It returns what is
// wrong, and otherwise how far the answers agree.
func parityDiff(banned map[int32]float64, got, want greedyAnswer) (problems []string, note string) {
	if len(want.ids) != parityTokens || len(got.ids) != parityTokens {
		problems = append(problems, fmt.Sprintf("genq answered %d tokens, llama-server %d; want %d each", len(got.ids), len(want.ids), parityTokens))
	}
	for i := range min(len(got.ids), len(want.ids)) {
		g, w := got.entries[i], want.entries[i]
		_, peerHas := want.entries[i]
		if got.ids[i] == want.ids[i] {
			if peerHas && math.Abs(g.logprob-w.logprob) > tieMargin {
				problems = append(problems, fmt.Sprintf("token %d (%d): logprob %.5f, llama-server %.5f", i, got.ids[i], g.logprob, w.logprob))
			}
			continue
		}
		gm, gok := g.margin(banned)
		wm, wok := w.margin(banned)
		tie := gok && gm <= tieMargin && (!peerHas || wok && wm <= tieMargin)
		detail := fmt.Sprintf("genq drew %d (top %s), llama-server %d (top %s)", got.ids[i], topString(g.top), want.ids[i], topString(w.top))
		if !tie {
			problems = append(problems, fmt.Sprintf("the answers part at token %d, not at a tie (margins %.5f genq, %.5f llama-server): %s\ngenq:         %v\nllama-server: %v",
				i, gm, wm, detail, got.ids, want.ids))
			return problems, ""
		}
		return problems, fmt.Sprintf("the answers part at token %d at a tie (margins %.5f genq, %.5f llama-server, within %g): %s", i, gm, wm, tieMargin, detail)
	}
	return problems, fmt.Sprintf("%d tokens alike", min(len(got.ids), len(want.ids)))
}

// topString lists the most likely tokens of a position, best first.
func topString(top map[int32]float64) string {
	ids := slices.SortedFunc(maps.Keys(top), func(a, b int32) int { return cmp.Compare(top[b], top[a]) })
	var sb strings.Builder
	for i, id := range ids[:min(len(ids), 4)] {
		if i > 0 {
			sb.WriteString(" ")
		}
		fmt.Fprintf(&sb, "%d:%.5f", id, top[id])
	}
	return sb.String()
}

// TestParityDiff: the parity check passes answers that agree, and answers
// that part only where both engines' two best allowed tokens tie, and
// fails any other parting or a log-probability that differs.
func TestParityDiff(t *testing.T) {
	const banned = 99
	answer := func(ids []int32, at int, top map[int32]float64) greedyAnswer {
		a := greedyAnswer{ids: ids, entries: map[int]positionLogprobs{}}
		for i, id := range ids {
			a.entries[i] = positionLogprobs{logprob: -1, top: map[int32]float64{id: -1, id + 1: -3}}
		}
		if top != nil {
			a.entries[at] = positionLogprobs{logprob: top[ids[at]], top: top}
		}
		return a
	}
	ids := func(at int, last int32) []int32 {
		out := make([]int32, parityTokens)
		for i := range out {
			out[i] = int32(i % 50)
		}
		out[at] = last
		return out
	}
	tie := map[int32]float64{banned: -0.2, 1: -1.0000, 2: -1.0004}
	apart := map[int32]float64{1: -0.5, 2: -1.5}
	withoutEntry := func(a greedyAnswer, at int) greedyAnswer { delete(a.entries, at); return a }
	offBy := func(a greedyAnswer, at int, d float64) greedyAnswer {
		e := a.entries[at]
		e.logprob += d
		a.entries[at] = e
		return a
	}
	for _, c := range []struct {
		name      string
		got, want greedyAnswer
		ok        bool
	}{
		{"alike", answer(ids(5, 1), 0, nil), answer(ids(5, 1), 0, nil), true},
		{"a tie, the banned token left out", answer(ids(5, 1), 5, tie), answer(ids(5, 2), 5, tie), true},
		{"a tie, no peer entry there", answer(ids(5, 1), 5, tie), withoutEntry(answer(ids(5, 2), 5, nil), 5), true},
		{"no tie", answer(ids(5, 1), 5, apart), answer(ids(5, 2), 5, apart), false},
		{"a tie for genq only", answer(ids(5, 1), 5, tie), answer(ids(5, 2), 5, apart), false},
		{"a logprob apart", answer(ids(5, 1), 0, nil), offBy(answer(ids(5, 1), 0, nil), 3, 2e-3), false},
		{"short", answer(ids(5, 1)[:60], 0, nil), answer(ids(5, 1), 0, nil), false},
	} {
		problems, note := parityDiff(map[int32]float64{banned: -100}, c.got, c.want)
		if ok := len(problems) == 0; ok != c.ok {
			t.Errorf("%s: problems %q (note %q), want ok = %v", c.name, problems, note, c.ok)
		}
	}
}
