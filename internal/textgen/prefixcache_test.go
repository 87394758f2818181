package textgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
)

// conversation is a chat whose next turn carries every answer so far.
type conversation struct {
	messages []genq.Message
}

func (c *conversation) ask(text string) genq.Job {
	c.messages = append(c.messages, genq.Message{Role: genq.RoleUser, Content: text})
	return genq.Job{TextRequest: genq.TextRequest{Messages: slices.Clone(c.messages)}}
}

func (c *conversation) answered(text string) {
	c.messages = append(c.messages, genq.Message{Role: genq.RoleAssistant, Content: text})
}

var turnTexts = []string{
	"Tell me about the sea and the ships that sail on it.",
	"And what about the harbours?",
	"Which one is the oldest, and why does it matter to sailors today?",
}

// TestPrefixCacheChangesNoAnswer: conversations whose later turns start
// from the cells their earlier turns left answer exactly as with the cache
// off (greedy, and seeded sampling), with log-probabilities within 1e-3,
// with the KV cache unified and not; and the later turns did reuse cells.
func TestPrefixCacheChangesNoAnswer(t *testing.T) {
	seed := int64(7)
	temp := 0.8
	for _, kv := range []string{"off", "on"} {
		for _, sampling := range []string{"greedy", "seeded"} {
			t.Run("kv-unified "+kv+"/"+sampling, func(t *testing.T) {
				// A context where copying a stream pays (streamCopyRatio).
				cfg := Config{MaxNewTokens: 24, Slots: 2, KVUnified: kv, ContextSize: 2048}
				on := openTiny(t, genq.VariantB, cfg)
				cfg.PrefixCache = "off"
				off := openTiny(t, genq.VariantB, cfg)
				convs := map[*Backend][]*conversation{on: {{}, {}}, off: {{}, {}}}
				reused := 0
				for turn, text := range turnTexts {
					for c := range 2 {
						var got [2]seqResult
						for i, b := range []*Backend{on, off} {
							job := convs[b][c].ask(fmt.Sprintf("%s (conversation %d)", text, c))
							job.Logprobs, job.TopLogprobs = true, 2
							if sampling == "seeded" {
								job.Seed, job.Temperature = &seed, &temp
							}
							res, err := b.generateJob(context.Background(), job)
							if err != nil {
								t.Fatal(err)
							}
							convs[b][c].answered(res.Text)
							got[i] = res
						}
						if got[0].Text != got[1].Text {
							t.Fatalf("turn %d of conversation %d:\ncache on  %q\ncache off %q", turn, c, got[0].Text, got[1].Text)
						}
						assertLogprobsNear(t, got[0].Logprobs, got[1].Logprobs, 1e-3)
						if got[1].CachedTokens != len(off.prefix) {
							t.Errorf("cache off reused %d tokens, want the shared prefix's %d", got[1].CachedTokens, len(off.prefix))
						}
						if turn > 0 && got[0].CachedTokens > len(on.prefix) {
							reused++
						}
					}
				}
				if reused < 2*(len(turnTexts)-1) {
					t.Errorf("%d later turns reused cached cells, want all %d: the comparison proves little", reused, 2*(len(turnTexts)-1))
				}
			})
		}
	}
}

func assertLogprobsNear(t *testing.T, got, want []genq.TokenLogprob, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d logprobs, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Token != want[i].Token || math.Abs(got[i].Logprob.Logprob-want[i].Logprob.Logprob) > tol {
			t.Fatalf("logprob %d: %q %.6f, want %q %.6f", i, got[i].Token, got[i].Logprob.Logprob, want[i].Token, want[i].Logprob.Logprob)
		}
	}
}

// TestPrefixCacheEvictsUnderPressure: more conversations than slots, their
// turns admitted together, evict each other's cells; every answer is still
// the one the cache-off backend gives.
func TestPrefixCacheEvictsUnderPressure(t *testing.T) {
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			cfg := Config{MaxNewTokens: 16, Slots: 2, KVUnified: kv}
			on := openTiny(t, genq.VariantB, cfg)
			cfg.PrefixCache = "off"
			off := openTiny(t, genq.VariantB, cfg)
			const n = 5
			convs := map[*Backend][]*conversation{}
			for _, b := range []*Backend{on, off} {
				for range n {
					convs[b] = append(convs[b], &conversation{})
				}
			}
			for turn, text := range turnTexts {
				var answers [2][]seqResult
				for i, b := range []*Backend{on, off} {
					jobs := make([]genq.Job, n)
					for c := range n {
						jobs[c] = convs[b][c].ask(fmt.Sprintf("%s (conversation %d)", text, c))
					}
					res, errs := jobsTogether(t, b, jobs)
					if err := errors.Join(errs...); err != nil {
						t.Fatal(err)
					}
					for c := range n {
						convs[b][c].answered(res[c].Text)
					}
					answers[i] = res
				}
				for c := range n {
					if answers[0][c].Text != answers[1][c].Text {
						t.Errorf("turn %d of conversation %d:\ncache on  %q\ncache off %q", turn, c, answers[0][c].Text, answers[1][c].Text)
					}
				}
			}
			st := on.sched.cache
			if st.evictions.Load() == 0 {
				t.Error("nothing was evicted: the test put no pressure on the cache")
			}
			if st.hitTokens.Load() <= int64(len(turnTexts)*n*len(on.prefix)) {
				t.Error("no turn reused a conversation's cells")
			}
			if held := st.heldTokens.Load(); held <= 0 || held > st.capacity {
				t.Errorf("the cache holds %d tokens of %d", held, st.capacity)
			}
		})
	}
}

// TestCachedTokensOfAKnownConversation: a prompt of known tokens answered
// with k tokens leaves its cells and k-1 answer tokens' (the last is never
// fed back); a prompt that extends them reuses all of them, one that
// leaves them at token 30 reuses 30, and a chat's next turn reuses at
// least its previous prompt.
func TestCachedTokensOfAKnownConversation(t *testing.T) {
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 32, Slots: 1, KVUnified: kv})
			prompt := make([]int32, 40)
			for i := range prompt {
				prompt[i] = int32(10 + 7*i%250)
			}
			const k = 10
			first, err := b.generateJob(context.Background(), genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: prompt, MaxTokens: k, IgnoreEOS: true}})
			if err != nil {
				t.Fatal(err)
			}
			if first.CachedTokens != 0 || first.Tokens != k {
				t.Fatalf("first prompt: %d cached, %d generated; want 0 and %d", first.CachedTokens, first.Tokens, k)
			}
			var held []int32
			if err := b.sched.exclusively(context.Background(), func() { held = slices.Clone(b.sched.cache.held[0]) }); err != nil {
				t.Fatal(err)
			}
			if len(held) != len(prompt)+k-1 || !slices.Equal(held[:len(prompt)], prompt) {
				t.Fatalf("the slot holds %d tokens, want the prompt's %d and %d of its answer", len(held), len(prompt), k-1)
			}
			longer := append(slices.Clone(held), 5, 6, 7)
			second, err := b.generateJob(context.Background(), genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: longer, MaxTokens: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if second.CachedTokens != len(held) {
				t.Errorf("a prompt extending the held tokens reused %d, want %d", second.CachedTokens, len(held))
			}
			branch := append(slices.Clone(prompt[:30]), 9, 9, 9)
			third, err := b.generateJob(context.Background(), genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: branch, MaxTokens: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if third.CachedTokens != 30 {
				t.Errorf("a prompt leaving the held tokens at 30 reused %d", third.CachedTokens)
			}

			var c conversation
			turn1, err := b.generateJob(context.Background(), c.ask("Tell me about the sea."))
			if err != nil {
				t.Fatal(err)
			}
			c.answered(turn1.Text)
			turn2, err := b.generateJob(context.Background(), c.ask("And the ships?"))
			if err != nil {
				t.Fatal(err)
			}
			if turn2.CachedTokens < turn1.PromptTokens || turn2.CachedTokens >= turn2.PromptTokens {
				t.Errorf("turn 2 of %d prompt tokens reused %d, want at least turn 1's %d", turn2.PromptTokens, turn2.CachedTokens, turn1.PromptTokens)
			}
		})
	}
}

// TestPrefixCacheSkipsHalfWrittenCells: a sequence that failed, was
// cancelled or started over leaves nothing for the next prompt, even when
// it had itself reused its slot's cells; the next turn computes again and
// answers as the cache-off backend does.
func TestPrefixCacheSkipsHalfWrittenCells(t *testing.T) {
	errBad := errors.New("injected step failure")
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			cfg := Config{MaxNewTokens: 16, Slots: 2, KVUnified: kv, IgnoreEOS: true}
			off := openTiny(t, genq.VariantB, Config{MaxNewTokens: 16, Slots: 2, KVUnified: kv, IgnoreEOS: true, PrefixCache: "off"})
			want := func(job genq.Job) string {
				res, err := off.generateJob(context.Background(), job)
				if err != nil {
					t.Fatal(err)
				}
				return res.Text
			}
			// A conversation whose first turn is cached, and its second turn.
			setup := func(b *Backend) (turn2 genq.Job) {
				var c conversation
				res, err := b.generateJob(context.Background(), c.ask(turnTexts[0]))
				if err != nil {
					t.Fatal(err)
				}
				c.answered(res.Text)
				return c.ask(turnTexts[1])
			}
			retry := func(b *Backend, job genq.Job, what string) {
				t.Helper()
				res, err := b.generateJob(context.Background(), job)
				if err != nil {
					t.Fatal(err)
				}
				if res.CachedTokens != len(b.prefix) {
					t.Errorf("after a %s turn the next reused %d tokens, want only the shared prefix's %d", what, res.CachedTokens, len(b.prefix))
				}
				if w := want(job); res.Text != w {
					t.Errorf("after a %s turn: %q, cache off %q", what, res.Text, w)
				}
			}

			t.Run("failed", func(t *testing.T) {
				b := openTiny(t, genq.VariantB, cfg)
				turn2 := setup(b)
				bad, err := b.newJobRequest(turn2)
				if err != nil {
					t.Fatal(err)
				}
				b.sched.fault = func(st *step) error {
					for _, seq := range st.seqs {
						if slices.Equal(seq.req.prompt, bad.prompt) && seq.generated >= 3 {
							if seq.cached <= len(b.prefix) {
								return errors.New("the failing turn did not reuse its slot: the test proves nothing")
							}
							return errBad
						}
					}
					return nil
				}
				if _, err := b.generateJob(context.Background(), turn2); !errors.Is(err, errBad) {
					t.Fatalf("the faulty turn got %v", err)
				}
				b.sched.fault = nil
				retry(b, turn2, "failed")
			})
			t.Run("cancelled", func(t *testing.T) {
				b := openTiny(t, genq.VariantB, cfg)
				turn2 := setup(b)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				// The first piece cancels, and holds the loop until the
				// scheduler's caller has seen it: the turn ends mid-answer.
				_, err := b.generateJobStream(ctx, turn2, func(genq.TextPiece) {
					cancel()
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
						if slices.ContainsFunc(b.sched.active, func(seq *sequence) bool { return seq.req.cancelled.Load() }) {
							return
						}
					}
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("the cancelled turn got %v", err)
				}
				// The loop frees the slot on its next pass: a request waits for
				// it, one that shares no token with the turn.
				if _, err := b.generateJob(context.Background(), genq.Job{TextRequest: genq.TextRequest{PromptTokenIDs: []int32{3, 4, 5}, MaxTokens: 2}}); err != nil {
					t.Fatal(err)
				}
				retry(b, turn2, "cancelled")
			})
			t.Run("restarted", func(t *testing.T) {
				b := openTiny(t, genq.VariantB, cfg)
				turn2 := setup(b)
				other := genq.Job{Envelope: genq.Envelope{Text: batchTexts[3]}}
				poison, err := b.newJobRequest(other)
				if err != nil {
					t.Fatal(err)
				}
				b.sched.fault = func(st *step) error {
					for _, seq := range st.seqs {
						if slices.Equal(seq.req.prompt, poison.prompt) && seq.generated >= 3 {
							return errBad
						}
					}
					return nil
				}
				res, errs := jobsTogether(t, b, []genq.Job{turn2, other})
				if !errors.Is(errs[1], errBad) || errs[0] != nil {
					t.Fatalf("got %v and %v, want the turn answered and the poisoned prompt failed", errs[0], errs[1])
				}
				b.sched.fault = nil
				if res[0].CachedTokens != len(b.prefix) {
					t.Errorf("the restarted turn reports %d reused tokens, want the shared prefix's %d: it started over", res[0].CachedTokens, len(b.prefix))
				}
				if w := want(turn2); res[0].Text != w {
					t.Errorf("restarted turn: %q, cache off %q", res[0].Text, w)
				}
			})
		})
	}
}

// TestPrefixCacheCopiesFromABusySlot: questions over one document sent
// together, after an earlier question left the document's cells in a slot:
// the first to start reuses that slot in place, the others copy the
// document's cells from it while it runs; every one answers as with the
// cache off, over both graphs.
func TestPrefixCacheCopiesFromABusySlot(t *testing.T) {
	doc := strings.Repeat("The harbour opens at dawn and the ships leave with the tide. ", 6)
	ask := func(q string) genq.Job {
		return genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: genq.RoleUser, Content: doc + q}}}}
	}
	questions := []string{"Who opens it?", "When do they leave?", "What is the tide?"}
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			cfg := Config{MaxNewTokens: 16, Slots: 4, KVUnified: kv, IgnoreEOS: true, ContextSize: 2048}
			on := openTiny(t, genq.VariantB, cfg)
			cfg.PrefixCache = "off"
			off := openTiny(t, genq.VariantB, cfg)
			if _, err := on.generateJob(context.Background(), ask("Where is it?")); err != nil {
				t.Fatal(err)
			}
			jobs := make([]genq.Job, len(questions))
			for i, q := range questions {
				jobs[i] = ask(q)
			}
			got, errs := jobsTogether(t, on, jobs)
			want, wantErrs := jobsTogether(t, off, jobs)
			if err := errors.Join(append(errs, wantErrs...)...); err != nil {
				t.Fatal(err)
			}
			for i := range questions {
				if got[i].Text != want[i].Text {
					t.Errorf("question %d:\ncache on  %q\ncache off %q", i, got[i].Text, want[i].Text)
				}
				if got[i].CachedTokens <= len(on.prefix)+len(doc)/2 {
					t.Errorf("question %d reused %d tokens: not the document's", i, got[i].CachedTokens)
				}
			}
			if n := on.sched.cache.copies.Load(); n != int64(len(questions)-1) {
				t.Errorf("%d starts copied from a busy slot, want %d", n, len(questions)-1)
			}
		})
	}
}

// TestLongStreamsComputeThePrefix: with a stream per slot llama.cpp copies
// a whole stream, so at a long context a short prefix is computed rather
// than copied; a unified cache shares cells, and copies any prefix.
func TestLongStreamsComputeThePrefix(t *testing.T) {
	for _, tt := range []struct {
		kv      string
		context int
		n       int
		copies  bool
	}{
		{"off", 131072, 35, false},
		{"off", 131072, 2048, true},
		{"off", 2048, 35, true},
		{"on", 131072, 35, true},
	} {
		b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 4, Slots: 2, KVUnified: tt.kv, ContextSize: tt.context})
		err := b.textModel.copyPrefix(0, 1, tt.n)
		if copied := err == nil; copied != tt.copies {
			t.Errorf("kv-unified %s, context %d: a prefix of %d copied: %v (%v), want %v", tt.kv, tt.context, tt.n, copied, err, tt.copies)
		}
	}
}
