package structured

import (
	"bufio"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// benchVocab is Llama 3's vocabulary when scripts/fetch-vocab.sh has
// written it, else a synthetic one of the same size: every byte, then
// words of lowercase letters, half of them after a space, lengths drawn
// like a BPE vocabulary's (mostly 3 to 8 bytes), and some punctuation runs.
func benchVocab(b *testing.B) ([][]byte, []int32, string) {
	b.Helper()
	const size = 128256
	if f, err := os.Open(filepath.Join("..", "..", ".cache", "llama3-vocab.hex")); err == nil {
		defer f.Close()
		var toks [][]byte
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			t, err := hex.DecodeString(sc.Text())
			if err != nil {
				b.Fatal(err)
			}
			toks = append(toks, t)
		}
		if len(toks) == size {
			// <|end_of_text|> and <|eot_id|>
			return toks, []int32{128001, 128009}, "llama3"
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	toks := make([][]byte, 0, size)
	seen := map[string]bool{}
	for c := 0; c < 256; c++ {
		toks = append(toks, []byte{byte(c)})
		seen[string(rune(c))] = true
	}
	punct := []byte(`{}[]":,.;()-_!?'/\ `)
	for len(toks) < size-1 {
		var t []byte
		if rng.IntN(20) == 0 {
			for n := 2 + rng.IntN(3); n > 0; n-- {
				t = append(t, punct[rng.IntN(len(punct))])
			}
		} else {
			if rng.IntN(2) == 0 {
				t = append(t, ' ')
			}
			n := 1 + rng.IntN(4) + rng.IntN(5)
			for ; n > 0; n-- {
				t = append(t, byte('a'+rng.IntN(26)))
			}
		}
		if !seen[string(t)] {
			seen[string(t)] = true
			toks = append(toks, t)
		}
	}
	toks = append(toks, nil) // the end-of-sequence token has no bytes
	return toks, []int32{size - 1}, "synthetic"
}

func BenchmarkNewVocab(b *testing.B) {
	toks, eos, name := benchVocab(b)
	b.Logf("vocabulary: %s, %d tokens", name, len(toks))
	for b.Loop() {
		NewVocab(toks, eos)
	}
}

// BenchmarkMask walks every corpus schema with random tokens and times each
// mask. The first pass over the corpus fills the per-node caches (cold);
// the passes after it reuse the same compiled grammars (warm), as a server
// does with its grammar cache.
func BenchmarkMask(b *testing.B) {
	toks, eos, name := benchVocab(b)
	v := NewVocab(toks, eos)
	corpus := loadCorpus(b)
	grammars := make([]*Grammar, len(corpus))
	for i, c := range corpus {
		g, err := Compile(c.Schema)
		if err != nil {
			b.Fatal(err)
		}
		grammars[i] = g
	}
	isEOS := map[int32]bool{}
	for _, e := range eos {
		isEOS[e] = true
	}
	mask := make([]uint64, (v.Size()+63)/64)
	var cold, warm []time.Duration
	pass := func(times *[]time.Duration, seed uint64) {
		for i, g := range grammars {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			m := g.NewMatcher()
			for step := 0; step < 64; step++ {
				t0 := time.Now()
				m.Mask(v, mask)
				*times = append(*times, time.Since(t0))
				ids := allowed(mask)
				id := ids[rng.IntN(len(ids))]
				if isEOS[id] {
					break
				}
				if !m.Advance(toks[id]) {
					b.Fatalf("mask and matcher disagree on %q", toks[id])
				}
			}
		}
	}
	b.ResetTimer()
	pass(&cold, 0)
	for i := 0; b.Loop(); i++ {
		pass(&warm, uint64(i+1))
	}
	b.StopTimer()
	q := func(d []time.Duration, p float64) float64 {
		slices.Sort(d)
		return float64(d[int(p*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(q(warm, 0.5), "median-µs/mask")
	b.ReportMetric(q(warm, 0.99), "p99-µs/mask")
	b.ReportMetric(q(cold, 0.5), "cold-median-µs/mask")
	b.ReportMetric(q(cold, 0.99), "cold-p99-µs/mask")
	b.ReportMetric(float64(len(warm)), "masks")
	b.Logf("vocabulary: %s; %d warm masks, max %v; %d cold masks, max %v", name, len(warm), slices.Max(warm), len(cold), slices.Max(cold))
}

// typicalSchema is a tool's parameters as applications write them.
const typicalSchema = `{"type":"object","properties":{"title":{"type":"string"},"start":{"type":"string"},"end":{"type":"string"},"attendees":{"type":"array","items":{"type":"object","properties":{"email":{"type":"string"},"optional":{"type":"boolean"}},"required":["email","optional"],"additionalProperties":false}},"reminder_minutes":{"type":["integer","null"]},"priority":{"enum":["low","normal","high"]}},"required":["title","start","end","attendees","reminder_minutes","priority"],"additionalProperties":false}`

func BenchmarkCompile(b *testing.B) {
	for b.Loop() {
		if _, err := Compile([]byte(typicalSchema)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCompileCached(b *testing.B) {
	c := NewCache(16)
	if _, err := c.Compile([]byte(typicalSchema)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c.Compile([]byte(typicalSchema))
	}
}
