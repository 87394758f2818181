package textgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/structured"
	"github.com/genq/genq/internal/structured/grammar"
	"github.com/genq/genq/internal/structured/toolcall"
	"github.com/genq/genq/internal/textgen/sample"
)

// Schemas and tools the constrained tests decode to.
var (
	personSchema = json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},` +
		`"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},` +
		`"required":["name","age","tags"],"additionalProperties":false}`)
	weatherTool = genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":8},` +
			`"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`)}}
	timeTool = genq.Tool{Type: "function", Function: genq.ToolFunction{Name: "now",
		Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)}}
)

// The tiny model's tokens of the bytes that close JSON strings, objects
// and arrays, and open a call: its vocabulary starts with the 256 bytes.
const (
	tokQuote      = '"'
	tokCloseBrace = '}'
	tokCloseArray = ']'
	tokOpenBrace  = '{'
)

// chatJob is a chat at temperature 1 whose logit bias favours the bytes
// that close strings and containers: a random model rarely picks them out
// of its few hundred tokens, and its answers would run to max_tokens. The
// bias applies among the tokens the grammar allows, so answers stay valid.
func chatJob(id string, seed int64) genq.Job {
	temp := 1.0
	return genq.Job{
		Envelope: genq.Envelope{ID: id},
		TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: genq.RoleUser, Content: "Answer in JSON."}},
			Temperature: &temp, Seed: &seed,
			LogitBias: map[int32]float64{tokQuote: 4, tokCloseBrace: 4, tokCloseArray: 4}},
	}
}

// finishing is a logit bias that ends any of constrainedCases' answers (and
// TestConstrainedAnswersPreparedLater's) in well under a hundred tokens,
// whatever a random model prefers, each choice ahead of the others by more
// than the tiny model's logits spread (about ±10). Wherever the grammar
// allows it, '{' comes first: it opens a lazy call at once, ahead of
// ending the answer as empty prose, and fills a string, up to its
// maxLength, which every string these schemas and tools can reach has.
// Then a container closes ('}' and ']' ahead of a key or an item, so that
// no optional member or unbounded key is written), and ':', ',', '[', '"'
// and '0' come before whitespace or more digits. An end-of-turn token
// ends the answer as soon as the grammar accepts, ahead of a parallel
// call's separator. Only the bytes of JSON's punctuation are tokens that
// write it: the tiny vocabulary's merges are of letters.
func finishing(b *Backend) map[int32]float64 {
	bias := map[int32]float64{tokOpenBrace: 300, tokCloseBrace: 200, tokCloseArray: 200,
		'[': 100, tokQuote: 100, ':': 100, ',': 100, '0': 100}
	for _, id := range b.stopTokens() {
		bias[id] = 100
	}
	return bias
}

// constrainedCases are the kinds of constraint a job can carry, each with
// what its answers must be.
func constrainedCases() []struct {
	name  string
	shape func(*genq.Job)
	calls bool // answers that stop are tool calls
	lazy  bool // answers may be prose instead
} {
	required := &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
	named := &genq.ToolChoice{Function: "now"}
	return []struct {
		name  string
		shape func(*genq.Job)
		calls bool
		lazy  bool
	}{
		{"json_object", func(j *genq.Job) { j.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONObject} }, false, false},
		{"json_schema", func(j *genq.Job) {
			j.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema,
				JSONSchema: &genq.JSONSchema{Name: "person", Schema: personSchema}}
		}, false, false},
		{"tools required", func(j *genq.Job) { j.Tools, j.ToolChoice = []genq.Tool{weatherTool, timeTool}, required }, true, false},
		{"tool named", func(j *genq.Job) { j.Tools, j.ToolChoice = []genq.Tool{weatherTool, timeTool}, named }, true, false},
		{"tools auto", func(j *genq.Job) {
			// About half the answers open a call.
			j.Tools, j.LogitBias[tokOpenBrace] = []genq.Tool{weatherTool, timeTool}, 11
		}, true, true},
	}
}

// matches reports whether text is a complete answer of g: a fresh matcher
// takes every byte and may end there.
func matches(g *grammar.Grammar, text string) bool {
	m := g.NewMatcher()
	return m.Advance([]byte(text)) && m.Accepting()
}

// TestConstrainedAnswersMatchTheirGrammar: at temperature 1 on random
// weights, which write valid JSON only by the mask, every answer that
// stops is complete under its grammar (so no end-of-turn came before the
// grammar accepted), and every other answer ran to max_tokens, with the KV
// cache unified and not. Whether a sampled answer finishes is the model's
// (and the CPU's) choice, most grammars here being unbounded; one more job
// per case, biased by finishing, finishes by construction, so that the
// grammar's end is always checked.
func TestConstrainedAnswersMatchTheirGrammar(t *testing.T) {
	const maxTokens = 160
	for _, kv := range []string{"off", "on"} {
		t.Run("kv-unified "+kv, func(t *testing.T) {
			b := openTiny(t, genq.VariantA, Config{Slots: 8, MaxNewTokens: maxTokens, ContextSize: 2048, KVUnified: kv})
			rounds := 12
			for _, tc := range constrainedCases() {
				t.Run(tc.name, func(t *testing.T) {
					jobs := make([]genq.Job, rounds+1)
					for i := range jobs {
						jobs[i] = chatJob(fmt.Sprintf("%s-%d", tc.name, i), int64(i+1))
						tc.shape(&jobs[i])
					}
					jobs[rounds].LogitBias = finishing(b)
					c, err := structured.NewCache(4).ForJob(jobs[0])
					if err != nil {
						t.Fatal(err)
					}
					out, errs := jobsTogether(t, b, jobs)
					stopped, calls, prose := 0, 0, 0
					for i, res := range out {
						if errs[i] != nil {
							t.Fatalf("job %d: %v", i, errs[i])
						}
						text := res.Text
						switch {
						case res.FinishReason == genq.FinishLength:
							if res.Tokens != maxTokens {
								t.Errorf("job %d: length after %d tokens, want %d", i, res.Tokens, maxTokens)
							}
						case tc.lazy && !strings.HasPrefix(text, "{"):
							prose++
							if len(res.ToolCalls) > 0 {
								t.Errorf("job %d: prose %q came back as calls", i, text)
							}
						case !matches(c.Grammar, text):
							t.Errorf("job %d: %s answer %q does not match its grammar", i, res.FinishReason, text)
						case tc.calls:
							calls++
							checkCalls(t, jobs[i], res)
						default:
							stopped++
							if res.FinishReason != genq.FinishStop || !json.Valid([]byte(text)) {
								t.Errorf("job %d: %s answer %q: want stop and JSON", i, res.FinishReason, text)
							}
						}
					}
					t.Logf("%d answers: %d stopped, %d tool calls, %d prose, %d cut by max_tokens",
						len(out), stopped, calls, prose, len(out)-stopped-calls-prose)
					want := genq.FinishStop
					if tc.calls {
						want = genq.FinishToolCalls
					}
					forced := out[rounds]
					t.Logf("biased to finish: %s %q in %d tokens", forced.FinishReason, forced.Text, forced.Tokens)
					if forced.FinishReason != want {
						t.Errorf("the answer biased to finish: %s %q, want %s", forced.FinishReason, forced.Text, want)
					}
				})
			}
		})
	}
}

// checkCalls checks a tool-calling answer's result: each call names an
// offered tool, its arguments are the model's JSON text, its id is the
// job's, and the text is the calls as written.
func checkCalls(t *testing.T, job genq.Job, res seqResult) {
	t.Helper()
	if res.FinishReason != genq.FinishToolCalls || len(res.ToolCalls) == 0 {
		t.Errorf("%s: finish %q with %d calls for %q: want tool_calls", job.ID, res.FinishReason, len(res.ToolCalls), res.Text)
		return
	}
	var written []genq.ToolCall
	for i, c := range res.ToolCalls {
		offered := slices.ContainsFunc(job.OfferedTools(), func(tl genq.Tool) bool { return tl.Function.Name == c.Function.Name })
		if !offered || c.Type != "function" || c.ID != genq.ToolCallID(job.ID, i) || !json.Valid([]byte(c.Function.Arguments)) {
			t.Errorf("%s: call %d = %+v", job.ID, i, c)
		}
		written = append(written, c)
	}
	if job.ToolChoice != nil && job.ToolChoice.Function != "" && len(written) != 1 {
		t.Errorf("%s: %d calls of the named tool, want one", job.ID, len(written))
	}
	if got := toolcall.FormatToolCalls(written); !strings.EqualFold(strings.Join(strings.Fields(got), ""), strings.Join(strings.Fields(res.Text), "")) {
		t.Errorf("%s: the calls read back as %q from %q", job.ID, got, res.Text)
	}
}

// TestLazyGrammarBindsOnTheFirstToken: before a lazy answer's first token,
// every token with text is allowed except those that open a call the
// grammar refuses; a first token that opens a call binds the grammar, one
// of prose leaves the answer free, and one without text (a special token
// the dialect does not keep) is not allowed, and would leave it waiting.
func TestLazyGrammarBindsOnTheFirstToken(t *testing.T) {
	tokens := [][]byte{[]byte(`{`), []byte(`{"`), []byte(`{x`), []byte(`a`), []byte(`"`), nil, []byte(`<eot>`)}
	const eot = 6
	mv := maskVocabOf(tokens, []int32{eot})
	job := chatJob("lazy", 1)
	job.Tools = []genq.Tool{timeTool}
	c, err := structured.NewCache(1).ForJob(job)
	if err != nil || !c.Lazy {
		t.Fatalf("ForJob: %+v, %v; want a lazy constraint", c, err)
	}
	tests := []struct {
		name      string
		first     []byte
		wantState bindState
	}{
		{"a call binds", []byte(`{"`), bound},
		{"prose is free", []byte(`a`), free},
		{"a token without text decides nothing", nil, opening},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &request{narrowK: 40}
			sc := &seqConstraint{c: c, v: mv, mask: make([]uint64, 1), narrowK: req.narrowK}
			sc.start(req)
			if req.narrowK != 0 || !sc.masks() {
				t.Fatalf("a lazy constraint at its start: narrowK %d, masks %v; want 0 and true", req.narrowK, sc.masks())
			}
			row := make([]float32, len(tokens))
			if err := sc.maskRow(row); err != nil {
				t.Fatal(err)
			}
			// '{' and '{"' may open the call; '{x' opens none the grammar
			// allows; the rest is prose, and the end of turn ends an
			// answer of none; the token with no text is no answer.
			for id, want := range []bool{true, true, false, true, true, false, true} {
				if got := !isNaN(row[id]); got != want {
					t.Errorf("first token %q allowed: %v, want %v", tokens[id], got, want)
				}
			}
			if done, err := sc.follow(req, tt.first); done || err != nil {
				t.Fatalf("follow(%q) = %v, %v", tt.first, done, err)
			}
			if sc.state != tt.wantState {
				t.Fatalf("state %d after %q, want %d", sc.state, tt.first, tt.wantState)
			}
			if tt.wantState == free {
				if req.narrowK != 40 || sc.masks() {
					t.Fatalf("a free answer: narrowK %d, masks %v; want its sampler's 40 and no mask", req.narrowK, sc.masks())
				}
				return
			}
			if tt.wantState == opening {
				if req.narrowK != 0 || !sc.masks() {
					t.Fatalf("an answer still waiting: narrowK %d, masks %v; want 0 and true", req.narrowK, sc.masks())
				}
				return
			}
			row = make([]float32, len(tokens))
			if err := sc.maskRow(row); err == nil {
				t.Fatalf("after %q the grammar wants \"name\", which no token here writes; the mask allowed %v", tt.first, row)
			}
		})
	}
}

func isNaN(f float32) bool { return f != f }

// TestConstrainedAnswerCutByLength: an answer cut by max_tokens ends with
// "length", its text a start the grammar allows, and no tool calls. A bias
// of -100 keeps '}' from closing anything the grammar lets it choose not
// to close: every answer here needs a '}' it could not write, or more
// than n tokens, to finish.
func TestConstrainedAnswerCutByLength(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{ContextSize: 2048})
	for _, tc := range constrainedCases()[:4] {
		t.Run(tc.name, func(t *testing.T) {
			job := chatJob("cut-"+tc.name, 7)
			tc.shape(&job)
			const n = 6
			job.MaxTokens = n
			// No object closes, so that none ends within n tokens, not even
			// the json_object "{}" a random model may choose at once.
			job.LogitBias[tokCloseBrace] = -100
			c, err := structured.NewCache(1).ForJob(job)
			if err != nil {
				t.Fatal(err)
			}
			res, err := b.generateJob(context.Background(), job)
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != genq.FinishLength || res.Tokens != n || len(res.ToolCalls) > 0 {
				t.Fatalf("finish %q after %d tokens with %d calls: want length after %d, no calls", res.FinishReason, res.Tokens, len(res.ToolCalls), n)
			}
			if m := c.Grammar.NewMatcher(); !m.Advance([]byte(res.Text)) || m.Done() {
				t.Fatalf("%q: want an unfinished answer the grammar allows", res.Text)
			}
		})
	}
}

// TestToolCallIDsAreStable: a job run again (a redelivery) names its calls
// as it did; another job names them otherwise. Parallel calls are off: the
// grammar then admits one call of at most a few hundred bytes, which ends
// within the default budget of the context, whatever a random model
// samples; parallel calls may run on to max_tokens and call nothing.
func TestToolCallIDsAreStable(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{ContextSize: 2048})
	run := func(id string) seqResult {
		job := chatJob(id, 3)
		job.Tools, job.ToolChoice = []genq.Tool{weatherTool, timeTool}, &genq.ToolChoice{Mode: genq.ToolChoiceRequired}
		job.ParallelToolCalls = new(bool)
		res, err := b.generateJob(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.ToolCalls) == 0 {
			t.Fatalf("%s: %s %q: want tool calls", id, res.FinishReason, res.Text)
		}
		return res
	}
	first, again, other := run("job-1"), run("job-1"), run("job-2")
	if !slices.Equal(first.ToolCalls, again.ToolCalls) {
		t.Errorf("the same job called %+v, then %+v", first.ToolCalls, again.ToolCalls)
	}
	if first.ToolCalls[0].ID == other.ToolCalls[0].ID || !strings.HasPrefix(first.ToolCalls[0].ID, "call_") {
		t.Errorf("ids %q and %q: want call_ ids that differ between jobs", first.ToolCalls[0].ID, other.ToolCalls[0].ID)
	}
}

// TestConstrainedSamplingKeepsItsSettings: the sampler's settings apply
// among the allowed tokens (a bias picks among them; greedy is the best
// of them, the same each time), and logprobs are the model's own, before
// the mask.
func TestConstrainedSamplingKeepsItsSettings(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{ContextSize: 2048})
	object := &genq.ResponseFormat{Type: genq.FormatJSONObject}

	biased := chatJob("bias", 1)
	biased.ResponseFormat = object
	biased.LogitBias = map[int32]float64{tokCloseBrace: 100, 'x': 100}
	res, err := b.generateJob(context.Background(), biased)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "{}" || res.FinishReason != genq.FinishStop {
		t.Errorf("biased to '}' and 'x': %s %q, want stop \"{}\"", res.FinishReason, res.Text)
	}

	zero := 0.0
	greedy := chatJob("greedy", 1)
	greedy.ResponseFormat, greedy.Temperature, greedy.LogitBias = object, &zero, nil
	greedy.Logprobs, greedy.TopLogprobs = true, 3
	one, err := b.generateJob(context.Background(), greedy)
	if err != nil {
		t.Fatal(err)
	}
	greedy.Seed = new(int64)
	two, err := b.generateJob(context.Background(), greedy)
	if err != nil {
		t.Fatal(err)
	}
	// The grammar lets an object follow whitespace, which greedy may
	// choose on some CPU's rounding: the object is what is asserted.
	if one.Text != two.Text || !strings.HasPrefix(strings.TrimLeft(one.Text, " \t\n\r"), "{") {
		t.Errorf("greedy answers %q and %q: want the same object twice", one.Text, two.Text)
	}

	free := greedy
	free.ResponseFormat = nil
	model, err := b.generateJob(context.Background(), free)
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Logprobs) == 0 || len(model.Logprobs) == 0 {
		t.Fatalf("no logprobs: %d and %d entries", len(one.Logprobs), len(model.Logprobs))
	}
	// The first row is the same prompt's: its alternatives are the model's.
	if got, want := one.Logprobs[0].Top, model.Logprobs[0].Top; !slices.EqualFunc(got, want, func(a, b genq.Logprob) bool {
		return a.Token == b.Token && a.Logprob == b.Logprob
	}) {
		t.Errorf("first token's top logprobs %+v under the mask, %+v without: want the model's own", got, want)
	}
	if model.Logprobs[0].Top[0].Token != "{" && one.Logprobs[0].Logprob.Logprob >= model.Logprobs[0].Logprob.Logprob {
		t.Errorf("the masked first token's logprob %v is not below the free best %v", one.Logprobs[0].Logprob.Logprob, model.Logprobs[0].Logprob.Logprob)
	}
}

// TestBadConstraintIsInvalid: a schema genq cannot enforce is the job's
// fault, refused before any step, with what is wrong.
func TestBadConstraintIsInvalid(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{})
	tests := []struct {
		name, schema, want string
	}{
		{"unsupported keyword", `{"type":"array","uniqueItems":true}`, "uniqueItems"},
		{"unsatisfiable", `{"enum":[]}`, "enum"},
		{"ref to nowhere", `{"$ref":"#/$defs/missing"}`, "missing"},
		{"not JSON", `{"type":`, "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := chatJob("bad", 1)
			job.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema,
				JSONSchema: &genq.JSONSchema{Name: "x", Schema: json.RawMessage(tt.schema)}}
			_, err := b.Generate(context.Background(), job, nil)
			if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), tt.want) {
				t.Fatalf("err = %v; want invalid, naming %q", err, tt.want)
			}
		})
	}
	if got := b.sched.stats.admitted.Load(); got != 0 {
		t.Errorf("%d sequences admitted; want none", got)
	}
}

// TestConstrainedRowsBesideFreeOnes: constrained rows share steps with
// free ones (greedy, seeded), and every job answers as it does alone.
// The tool job names its tool, "now", whose call the grammar bounds to
// one call of at most 60 bytes (the fixed text, an empty object and at
// most two runs of whitespace of 17 bytes), so it always ends in a call
// within the 120 tokens, whatever a random model samples; with tools
// merely required, parallel calls could run on to max_tokens.
func TestConstrainedRowsBesideFreeOnes(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 120, Slots: 4, ContextSize: 2048, Temperature: 0.8, TopK: 20})
	zero, seed := 0.0, int64(9)
	object, tools := chatJob("object", 2), chatJob("tools", 3)
	object.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONObject}
	tools.Tools, tools.ToolChoice = []genq.Tool{weatherTool, timeTool}, &genq.ToolChoice{Function: "now"}
	chat := []genq.Message{{Role: genq.RoleUser, Content: "Hello"}}
	jobs := []genq.Job{
		{TextRequest: genq.TextRequest{Messages: chat, Temperature: &zero, IgnoreEOS: true}},
		{TextRequest: genq.TextRequest{Messages: chat, Seed: &seed, IgnoreEOS: true}},
		object, tools,
	}
	together, errs := jobsTogether(t, b, jobs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := b.sched.stats.maxSequences.Load(); n < 2 {
		t.Fatalf("at most %d sequence(s) shared a step: the check below proves nothing", n)
	}
	for i, job := range jobs {
		alone, err := b.generateJob(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if together[i].Text != alone.Text || together[i].FinishReason != alone.FinishReason {
			t.Errorf("job %d: beside the others %s %q, alone %s %q", i, together[i].FinishReason, together[i].Text, alone.FinishReason, alone.Text)
		}
	}
	if together[3].FinishReason != genq.FinishToolCalls {
		t.Errorf("the tool job: %s %q, want tool calls", together[3].FinishReason, together[3].Text)
	}
}

// TestConstrainedAnswerRestartsAfterAFailedStep: a constrained sequence
// that a failed step starts over (failStep) starts its grammar over too,
// and answers as it does alone. Its schema bounds the answer, so that it
// stops whatever a random model samples: an object of one string of
// exactly 16 characters is at most 16 escaped pairs of 12 bytes, its fixed
// text and five runs of whitespace of 17 bytes, under 300 bytes and so
// under 300 tokens, within the 320 allowed; and at least 24 bytes, so
// that it is likely still running when the poison's step fails.
func TestConstrainedAnswerRestartsAfterAFailedStep(t *testing.T) {
	b := openTiny(t, genq.VariantB, Config{MaxNewTokens: 320, Slots: 2, ContextSize: 2048})
	errBad := errors.New("injected step failure")
	object := chatJob("object", 4)
	object.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{Name: "s",
		Schema: json.RawMessage(`{"type":"object","properties":{"s":{"type":"string","minLength":16,"maxLength":16}},"required":["s"],"additionalProperties":false}`)}}
	poison := genq.Job{TextRequest: genq.TextRequest{Messages: []genq.Message{{Role: genq.RoleUser, Content: "poison"}}, IgnoreEOS: true}}
	bad, err := b.jobPrompt(poison)
	if err != nil {
		t.Fatal(err)
	}
	b.sched.fault = func(st *step) error {
		for _, seq := range st.seqs {
			if slices.Equal(seq.req.prompt, bad) && seq.generated >= 5 {
				return errBad
			}
		}
		return nil
	}
	got, errs := jobsTogether(t, b, []genq.Job{object, poison})
	if !errors.Is(errs[1], errBad) || errs[0] != nil {
		t.Fatalf("errors %v; want the poison's alone", errs)
	}
	b.sched.fault = nil
	alone, err := b.generateJob(context.Background(), object)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Text != alone.Text || got[0].FinishReason != alone.FinishReason || got[0].FinishReason != genq.FinishStop {
		t.Errorf("after the restart %s %q, alone %s %q; want the same stopped answer", got[0].FinishReason, got[0].Text, alone.FinishReason, alone.Text)
	}
}

// TestFewAllowedDrawsAsTheMaskedRow: a row with few tokens allowed is
// sampled from its candidates (SampleTop), and draws what the sampler
// draws from the whole row with the rest set to NaN, settings and seed
// alike.
func TestFewAllowedDrawsAsTheMaskedRow(t *testing.T) {
	var tokens [][]byte
	for c := range 256 {
		tokens = append(tokens, []byte{byte(c)})
	}
	tokens = append(tokens, []byte(`{"`), []byte(`{}`), []byte(`{ "`), nil)
	eos := int32(len(tokens) - 1)
	mv := maskVocabOf(tokens, []int32{eos})
	g := structured.CompileJSONObject()
	rng := rand.New(rand.NewPCG(3, 4))
	tests := []sample.Params{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 2, TopP: 0.9},
		{Temperature: 1.3, MinP: 0.05},
		{Temperature: 0},
		{Temperature: 0.8, FrequencyPenalty: 0.5, PresencePenalty: 0.3, RepetitionPenalty: 1.2, LogitBias: map[int32]float32{' ': 3, '"': -2}},
	}
	for i, params := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for seed := range uint64(20) {
				m := g.NewMatcher()
				prefix := []string{"", `{`, `{"a":1`, `{"a":`}[seed%4]
				m.Advance([]byte(prefix))
				row := make([]float32, len(tokens))
				for j := range row {
					row[j] = float32(rng.NormFloat64() * 2)
				}
				sc := &seqConstraint{c: structured.Constraint{Grammar: g}, v: mv, m: m, mask: make([]uint64, (len(tokens)+63)/64)}
				req := &request{sampler: sample.New(params, seed), constraint: sc}
				req.sampler.RememberPrompt([]int32{' ', '{'})
				few, _, err := sampleMasked(req, slices.Clone(row))
				if err != nil {
					t.Fatal(err)
				}
				if allowed, _ := sc.fillMask(len(row)); allowed > fewAllowed {
					t.Fatalf("%d allowed: the test needs few", allowed)
				}
				whole := slices.Clone(row)
				if err := sc.maskRow(whole); err != nil {
					t.Fatal(err)
				}
				ref := sample.New(params, seed)
				ref.RememberPrompt([]int32{' ', '{'})
				want, err := ref.Sample(whole)
				if err != nil {
					t.Fatal(err)
				}
				if few != want {
					t.Errorf("seed %d after %q: %q from the candidates, %q from the masked row", seed, prefix, tokens[few], tokens[want])
				}
			}
		})
	}
}

// TestAmbiguousGrammarEndsTheAnswer: a schema whose branches read the
// answer in too many ways at once (the matcher's Err) ends that answer
// with an invalid error, and the backend goes on serving.
func TestAmbiguousGrammarEndsTheAnswer(t *testing.T) {
	b := openTiny(t, genq.VariantA, Config{ContextSize: 2048, MaxNewTokens: 100})
	job := chatJob("ambiguous", 1)
	job.LogitBias = map[int32]float64{'[': 100} // deeper at every token
	job.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{Name: "a",
		Schema: json.RawMessage(`{"$ref":"#/$defs/a","$defs":{"a":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/a"}},` +
			`{"type":"array","items":{"$ref":"#/$defs/a"},"maxItems":5}]}}}`)}}
	_, err := b.Generate(context.Background(), job, nil)
	if genq.ErrorCode(err) != genq.Invalid || !strings.Contains(genq.ErrorMessage(err), "too ambiguous") {
		t.Fatalf("err = %v; want invalid, too ambiguous", err)
	}
	if _, err := b.Generate(context.Background(), chatJob("next", 1), nil); err != nil {
		t.Fatalf("the next job: %v", err)
	}
}

// TestConstrainedAnswersPreparedLater: with a budget the compile alone
// spends, no mask is worked out before the first token; the background
// and the steps work them out, and the answers hold to their grammar as
// when every mask came first. The last job, biased by finishing, stops by
// construction: the others may run to max_tokens on a random model.
func TestConstrainedAnswersPreparedLater(t *testing.T) {
	const maxTokens = 160
	b := openTiny(t, genq.VariantA, Config{Slots: 4, MaxNewTokens: maxTokens, ContextSize: 2048, SchemaPrepareBudget: time.Nanosecond})
	open := json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"},"who":{"type":"object","properties":{"name":{"type":"string","maxLength":6},"mail":{"type":"string","format":"email"}}}},"required":["id","who"]}`)
	for _, schema := range []json.RawMessage{personSchema, open} {
		jobs := make([]genq.Job, 8)
		for i := range jobs {
			jobs[i] = chatJob(fmt.Sprintf("later-%d", i), int64(i+1))
			jobs[i].ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{Name: "x", Schema: schema}}
		}
		jobs[len(jobs)-1].LogitBias = finishing(b)
		c, err := structured.NewCache(4).ForJob(jobs[0])
		if err != nil {
			t.Fatal(err)
		}
		out, errs := jobsTogether(t, b, jobs)
		stopped := 0
		for i, res := range out {
			switch {
			case errs[i] != nil:
				t.Fatalf("job %d: %v", i, errs[i])
			case res.FinishReason == genq.FinishLength:
			case !matches(c.Grammar, res.Text) || !json.Valid([]byte(res.Text)):
				t.Errorf("job %d: %s answer %q does not match its grammar", i, res.FinishReason, res.Text)
			default:
				stopped++
			}
		}
		if last := out[len(out)-1]; last.FinishReason != genq.FinishStop {
			t.Errorf("%s: the answer biased to finish: %s %q, want stop", schema, last.FinishReason, last.Text)
		}
		t.Logf("%s: %d of %d answers stopped", schema, stopped, len(out))
	}
}
