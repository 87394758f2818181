package genq_test

import (
	"encoding/json"
	"flag"
	"reflect"
	"testing"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/golden"
)

var update = flag.Bool("update", false, "write the golden files of testdata from the values of the tests")

// The protocol's messages that genq's types make, the job message, a text
// result, a heartbeat and a job's progress (docs/protocol.md), each
// marshalled as the queue marshals it and held byte for byte to a golden
// file in testdata; each golden file is read back into the value it came
// from. The values are built field by field, not by composite literals,
// so that the test reads the same whatever parts Job is made of.
func TestProtocolGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		// value is what is marshalled; back is what the golden file
		// reads back into (nil: value itself).
		value, back any
		// full says that value sets every field, so none escapes the
		// golden file.
		full bool
	}{
		{name: "job_text", value: textJob()},
		{name: "job_batch", value: batchJob()},
		{name: "job_chat", value: chatJob()},
		{name: "job_structured", value: structuredJob()},
		{name: "job_prompt", value: promptJob()},
		{name: "job_tokens", value: tokensJob()},
		{name: "job_count", value: countJob()},
		{name: "job_image", value: imageJob()},
		{name: "job_embedding", value: embeddingJob()},
		{name: "job_all", value: allJob(), back: travelled(allJob()), full: true},
		{name: "result_text", value: rawJSON(genq.NewTextResult("A queue waits, patient.").Data),
			back: genq.TextResult{GeneratedText: "A queue waits, patient."}},
		{name: "result_stop", value: rawJSON(stopResult().Result().Data), back: stopResult()},
		{name: "result_tool_calls", value: rawJSON(toolCallsResult().Result().Data), back: toolCallsResult()},
		{name: "result_all", value: rawJSON(allResult().Result().Data), back: allResult(), full: true},
		{name: "result_detailed", value: rawJSON(genq.NewDetailedTextResult("Hi", genq.FinishLength,
			genq.Usage{PromptTokens: 12, CompletionTokens: 1}, allResult().Logprobs).Data), back: detailedResult()},
		{name: "result_embedding", value: rawJSON(embeddingResult().Result().Data), back: embeddingResult()},
		{name: "heartbeat", value: allHeartbeat(), full: true},
		{name: "heartbeat_old", value: oldHeartbeat()},
		{name: "progress", value: genq.Progress{Done: 7, Total: 28}, full: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := tc.back
			if back == nil {
				back = tc.value
			}
			if raw, ok := tc.value.(rawJSON); ok {
				if tc.full {
					allSet(t, reflect.ValueOf(back), tc.name)
				}
				golden.Check(t, tc.name, raw, back, *update)
				return
			}
			if tc.full {
				allSet(t, reflect.ValueOf(tc.value), tc.name)
			}
			b, err := json.Marshal(tc.value)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, tc.name, b, back, *update)
		})
	}
}

// rawJSON is a message the code under test marshalled itself.
type rawJSON []byte

// allSet fails the test for each field of v that holds its zero value,
// looking into the structs of package genq that v holds (embedded, named
// or pointed to) unless they write their own JSON.
func allSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	for i := range v.NumField() {
		f, fv := v.Type().Field(i), v.Field(i)
		if !f.IsExported() {
			continue
		}
		if fv.IsZero() {
			t.Errorf("%s.%s is not set: give it a value, so the golden file holds it", path, f.Name)
			continue
		}
		if fv.Kind() == reflect.Pointer {
			fv = fv.Elem()
		}
		if fv.Kind() == reflect.Struct && fv.Type().PkgPath() == reflect.TypeFor[genq.Job]().PkgPath() &&
			!fv.Type().Implements(reflect.TypeFor[json.Marshaler]()) {
			allSet(t, fv, path+"."+f.Name)
		}
	}
}

var (
	deadline  = time.Date(2026, 11, 22, 10, 15, 0, 0, time.UTC)
	startedAt = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	beatAt    = time.Date(2026, 11, 22, 9, 12, 3, 250_000_000, time.UTC)
)

// textJob is a job of text alone, the message as it always was.
func textJob() genq.Job {
	var j genq.Job
	j.ID = "0193f1c2-7d1e-7c3a-9a55-2f0e9c1d4b77"
	j.Variant = genq.VariantB
	j.Text = "Write a haiku about queues."
	j.Deadline = deadline
	j.ReplyTo = "_INBOX.api.0193f1c2-7d1e-7c3a-9a55-2f0e9c1d4b77"
	return j
}

// batchJob is a job as a batch producer queues it: kept in the results
// store, with nobody listening.
func batchJob() genq.Job {
	var j genq.Job
	j.ID = "batch_01-line-7"
	j.Variant = genq.VariantA
	j.Messages = []genq.Message{{Role: genq.RoleUser, Content: "Summarise line 7."}}
	j.MaxTokens = 64
	j.Store = true
	return j
}

// chatJob is a chat with tools, sampling and stop strings, streamed.
func chatJob() genq.Job {
	var j genq.Job
	j.ID = "chat-1"
	j.Variant = genq.VariantB
	j.Deadline = deadline
	j.ReplyTo = "_INBOX.api.chat-1"
	j.Messages = []genq.Message{
		{Role: genq.RoleSystem, Content: "You are terse."},
		{Role: genq.RoleUser, Content: "Weather in Oslo?"},
		{Role: genq.RoleAssistant, ToolCalls: []genq.ToolCall{{ID: "call_chat1_0", Type: "function",
			Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}}},
		{Role: genq.RoleTool, Content: `{"temp": -3}`, ToolCallID: "call_chat1_0"},
	}
	j.MaxTokens = 200
	j.Temperature = ptr(0.5)
	j.TopP = ptr(0.875)
	j.Seed = ptr(int64(42))
	j.Stop = genq.StopList{"\n\n", "END"}
	j.Stream = true
	j.Logprobs = true
	j.TopLogprobs = 2
	j.Tools = []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "get_weather",
		Description: "The weather of a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}}
	j.ToolChoice = &genq.ToolChoice{Function: "get_weather"}
	j.ParallelToolCalls = ptr(false)
	return j
}

// structuredJob holds its answer to a JSON schema.
func structuredJob() genq.Job {
	var j genq.Job
	j.ID = "structured-1"
	j.Variant = genq.VariantA
	j.Deadline = deadline
	j.ReplyTo = "_INBOX.api.structured-1"
	j.Messages = []genq.Message{{Role: genq.RoleUser, Content: "A person, please."}}
	j.MaxCompletionTokens = 128
	j.ResponseFormat = &genq.ResponseFormat{Type: genq.FormatJSONSchema, JSONSchema: &genq.JSONSchema{
		Name: "person", Description: "Someone.", Strict: ptr(true),
		Schema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)}}
	j.Tools = []genq.Tool{{Type: "function", Function: genq.ToolFunction{Name: "lookup", Strict: ptr(false)}}}
	j.ToolChoice = &genq.ToolChoice{Mode: genq.ToolChoiceNone}
	return j
}

// promptJob is a raw prompt scored by an evaluation harness, with vLLM's
// and OpenAI's sampling extensions.
func promptJob() genq.Job {
	var j genq.Job
	j.ID = "prompt-1"
	j.Variant = genq.VariantB
	j.Prompt = "The capital of France is"
	j.Echo = true
	j.Logprobs = true
	j.PromptOnly = true
	j.TopK = ptr(40)
	j.MinP = ptr(0.0625)
	j.RepetitionPenalty = ptr(1.125)
	j.IgnoreEOS = true
	j.FrequencyPenalty = ptr(0.25)
	j.PresencePenalty = ptr(-0.5)
	j.LogitBias = map[int32]float64{128009: -100, 7: 2.5}
	j.Stop = genq.StopList{"."}
	return j
}

// tokensJob is a prompt its producer tokenized, with a bound rather than
// a demand on its answer.
func tokensJob() genq.Job {
	var j genq.Job
	j.ID = "tokens-1"
	j.Variant = genq.VariantB
	j.PromptTokenIDs = []int32{128000, 791, 6864, 315}
	j.MaxTokens = 32000
	j.MaxTokensBound = true
	j.Temperature = ptr(0.0)
	return j
}

// countJob asks for the prompt's token count alone.
func countJob() genq.Job {
	var j genq.Job
	j.ID = "count-1"
	j.Variant = genq.VariantA
	j.ReplyTo = "_INBOX.api.count-1"
	j.Messages = []genq.Message{{Role: genq.RoleUser, Content: "How long am I?"}}
	j.MaxTokens = 1
	j.CountOnly = true
	j.Tools = chatJob().Tools
	return j
}

// imageJob is an image with every image parameter, streamed with previews.
func imageJob() genq.Job {
	var j genq.Job
	j.ID = "image-1"
	j.Variant = genq.VariantC
	j.Text = "A lighthouse at dusk."
	j.Deadline = deadline
	j.ReplyTo = "_INBOX.api.image-1"
	j.Store = true
	j.Seed = ptr(int64(1234))
	j.Stream = true
	j.NegativePrompt = "blurry"
	j.Width = 768
	j.Height = 512
	j.Steps = 28
	j.GuidanceScale = ptr(7.0)
	j.OutputFormat = genq.ImageJPEG
	j.OutputCompression = ptr(85)
	j.PartialImages = 2
	return j
}

// allJob sets every field of Job, whether or not a valid job would.
func allJob() genq.Job {
	j := chatJob()
	j.Text = "text"
	j.Store = true
	j.KeepAlive = ptr(300.0)
	j.Prompt = "prompt"
	j.PromptTokenIDs = []int32{1, 2}
	j.MaxCompletionTokens = 200
	j.MaxTokensBound = true
	j.PromptOnly = true
	j.CountOnly = true
	j.TopK = ptr(-1)
	j.MinP = ptr(0.125)
	j.RepetitionPenalty = ptr(1.5)
	j.IgnoreEOS = true
	j.FrequencyPenalty = ptr(-2.0)
	j.PresencePenalty = ptr(2.0)
	j.LogitBias = map[int32]float64{3: 1}
	j.Echo = true
	j.ResponseFormat = structuredJob().ResponseFormat
	j.Thinking = &genq.Thinking{Enabled: true, BudgetTokens: 2048, Effort: "high"}
	img := imageJob()
	j.NegativePrompt = img.NegativePrompt
	j.Width, j.Height, j.Steps = img.Width, img.Height, img.Steps
	j.GuidanceScale = img.GuidanceScale
	j.OutputFormat, j.OutputCompression = img.OutputFormat, img.OutputCompression
	j.PartialImages = img.PartialImages
	e := embeddingJob()
	j.Inputs, j.Dimensions, j.Truncate = e.Inputs, e.Dimensions, e.Truncate
	// Neither travels: the golden file must not hold them.
	j.MaxTokensParam = "max_output_tokens"
	j.IgnoredTools = []string{"web_search"}
	j.Attempt = 3
	return j
}

// embeddingJob is an embedding job: a text and token ids on the
// embedding model's queue.
func embeddingJob() genq.Job {
	var j genq.Job
	j.ID = "0193f1c2-7d1e-7c3a-9a55-2f0e9c1d4b7e"
	j.Variant = genq.QueueToken(genq.KindEmbedding, "bge-small-en-v1.5")
	j.Deadline = deadline
	j.ReplyTo = "_INBOX.api.0193f1c2-7d1e-7c3a-9a55-2f0e9c1d4b7e"
	j.Inputs = []genq.EmbeddingInput{{Text: "A queue waits, patient."}, {TokenIDs: []int32{2, 40, 3}}}
	j.Dimensions = 256
	j.Truncate = true
	return j
}

// embeddingResult is an embedding job's result.
func embeddingResult() genq.EmbeddingResult {
	return genq.EmbeddingResult{Model: "bge-small-en-v1.5-f16.gguf", Embeddings: [][]float32{{0.6, -0.8}, {1, 0}},
		Tokens: []int{8, 3}, Usage: genq.Usage{PromptTokens: 11}}
}

// travelled is j as it arrives: without the fields that do not travel.
func travelled(j genq.Job) genq.Job {
	j.MaxTokensParam = ""
	j.IgnoredTools = nil
	j.Attempt = 0
	return j
}

var logprobs = []genq.TokenLogprob{
	{Logprob: genq.Logprob{Token: "Hi", Bytes: []int{72, 105}, Logprob: -0.25}, Offset: 0,
		Top: []genq.Logprob{{Token: "Hi", Bytes: []int{72, 105}, Logprob: -0.25}, {Token: "Hello", Bytes: []int{72, 101, 108, 108, 111}, Logprob: -1.5}}},
	{Logprob: genq.Logprob{Token: "\ufffd", Bytes: []int{226, 128}, Logprob: genq.MinLogprob}, Offset: 2},
}

// stopResult is an answer a stop string ended.
func stopResult() genq.TextResult {
	return genq.TextResult{GeneratedText: "Paris", FinishReason: genq.FinishStop, StopSequence: ".",
		Usage: &genq.Usage{PromptTokens: 6, CompletionTokens: 2}}
}

// toolCallsResult is an answer that called tools, from a cached prefix.
func toolCallsResult() genq.TextResult {
	return genq.TextResult{
		GeneratedText: `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}`,
		FinishReason:  genq.FinishToolCalls,
		ToolCalls: []genq.ToolCall{{ID: genq.ToolCallID("chat-1", 0), Type: "function",
			Function: genq.ToolCallFunction{Name: "get_weather", Arguments: `{"city": "Oslo"}`}}},
		Usage: &genq.Usage{PromptTokens: 310, CompletionTokens: 21, CachedTokens: 256},
	}
}

// allResult sets every field of TextResult.
func allResult() genq.TextResult {
	r := toolCallsResult()
	r.StopSequence = "END"
	r.Reasoning = "They greet me."
	u := *r.Usage
	u.ReasoningTokens = 4
	r.Usage = &u
	r.Logprobs = logprobs
	r.UncheckedToolCalls = []genq.UncheckedToolCall{{Index: 0, Name: "get_weather", Reason: "the arguments fail the schema at #/city: pattern"}}
	r.PromptText = "Say hi"
	r.PromptLogprobs = []genq.TokenLogprob{
		{Logprob: genq.Logprob{Token: "Say", Bytes: []int{83, 97, 121}}},
		{Logprob: genq.Logprob{Token: " hi", Bytes: []int{32, 104, 105}, Logprob: -3.75}, Offset: 3},
	}
	return r
}

// detailedResult is what NewDetailedTextResult makes in result_detailed.
func detailedResult() genq.TextResult {
	return genq.TextResult{GeneratedText: "Hi", FinishReason: genq.FinishLength,
		Usage: &genq.Usage{PromptTokens: 12, CompletionTokens: 1}, Logprobs: logprobs}
}

// allHeartbeat sets every field of Heartbeat.
func allHeartbeat() genq.Heartbeat {
	return genq.Heartbeat{
		WorkerID: "gpu-node-7-1a2b3c4d", Variant: genq.VariantB,
		Device: genq.Device{Kind: "cuda", Name: "NVIDIA A10G", Engine: "ggml"},
		Model:  "Llama-3.1-8B-Instruct-BF16.gguf", Slots: 8, FreeSlots: 5, Draining: true, Routed: true,
		Limits: &genq.Limits{MaxNewTokens: 256, ContextSize: 8192, VocabSize: 128256, ImageMaxSize: 1024, ImageMaxSteps: 100},
		// A real beat has no load_error while loading: it is set here
		// so that the golden file holds every field.
		ModelState: genq.ModelLoading, LoadProgress: 0.5,
		LoadError: "the model llama-70b needs 42000000000 bytes (its file and the KV cache of its slots), over this worker's MODEL_MEMORY_BUDGET of 19000000000 bytes: raise the budget, or serve a smaller model",
		StartedAt: startedAt, At: beatAt,
	}
}

// oldHeartbeat is a heartbeat of a worker older than routing and limits.
func oldHeartbeat() genq.Heartbeat {
	return genq.Heartbeat{WorkerID: "cpu-1", Variant: genq.VariantC, Device: genq.Device{Kind: "cpu"},
		Model: "sd3", Slots: 1, StartedAt: startedAt, At: beatAt}
}
