// Package tinyexport writes a tiny SD3 export: the same directory layout,
// file names, input and output names and dtypes (fp16) as `optimum-cli export
// onnx` writes for stable-diffusion-3-medium, with narrow widths, tiny
// vocabularies and random weights. Its graphs really compute (embeddings,
// matmuls, convolutions, a VAE that upsamples by 8), so a pipeline test sees
// prompts and seeds change the image, in milliseconds per step on a CPU.
package tinyexport

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/genq/genq/internal/onnx/half"
	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/onnx/tokenizer"
)

// Widths of the tiny export. The real SD3-medium has 768 (CLIP-L), 1280
// (CLIP-G), 4096 (T5 and the joint width) and 16 latent channels; a pipeline
// reads all of them from the graphs.
const (
	ClipLWidth     = 8
	ClipGWidth     = 12
	JointWidth     = 24 // ≥ ClipLWidth+ClipGWidth: CLIP is zero-padded to it
	LatentChannels = 16
	// VAEScale is how much the VAE decoder upsamples.
	VAEScale = 8
)

// Words that get whole-word tokens in the tiny vocabularies, so prompts made
// of them tokenize into more than single letters.
var words = []string{"a", "photo", "of", "the", "cat", "dog", "red", "blue", "astronaut", "riding", "horse", "on", "moon"}

// Options vary the export's dtypes, to test that a pipeline reads them from
// the graphs. The zero value is what optimum writes for an fp16 export.
type Options struct {
	// Float32 makes every float input and output fp32 (weights stay fp16).
	Float32 bool
	// Int32IDs makes the text encoders take int32 token ids.
	Int32IDs bool
}

// Write writes the fp16 export into dir (created if needed). The same seed
// writes the same bytes.
func Write(dir string, seed int64) error {
	return WriteWithOptions(dir, seed, Options{})
}

// WriteWithOptions writes the export with the given dtypes; the same seed
// gives the same weights whatever the options.
func WriteWithOptions(dir string, seed int64, opts Options) error {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6765_6e71)) // "genq"
	io := ioTypes{float: onnxproto.Float16, ids: onnxproto.Int64}
	if opts.Float32 {
		io.float = onnxproto.Float
	}
	if opts.Int32IDs {
		io.ids = onnxproto.Int32
	}
	clipVocab, clipMerges := clipVocabulary()
	t5Pieces := t5Vocabulary()

	files := map[string][]byte{
		"model_index.json":                  mustJSON(modelIndex),
		"scheduler/scheduler_config.json":   mustJSON(map[string]any{"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 3.0}),
		"vae_decoder/config.json":           mustJSON(map[string]any{"_class_name": "AutoencoderKL", "latent_channels": LatentChannels, "scaling_factor": 1.5305, "shift_factor": 0.0609}),
		"text_encoder/model.onnx":           clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipLWidth),
		"text_encoder_2/model.onnx":         clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipGWidth),
		"text_encoder_3/model.onnx":         t5Model(newGraph("tiny_t5_encoder", rng, io), len(t5Pieces), JointWidth),
		"transformer/model.onnx":            transformerModel(newGraph("tiny_sd3_transformer", rng, io)),
		"vae_decoder/model.onnx":            vaeDecoderModel(newGraph("tiny_vae_decoder", rng, io)),
		"text_encoder/config.json":          mustJSON(clipConfig(ClipLWidth)),
		"text_encoder_2/config.json":        mustJSON(clipConfig(ClipGWidth)),
		"tokenizer/vocab.json":              mustJSON(clipVocab),
		"tokenizer/merges.txt":              mergesFile(clipMerges),
		"tokenizer/special_tokens_map.json": mustJSON(clipSpecials(tokenizer.CLIPEnd)),
		"tokenizer_2/vocab.json":            mustJSON(clipVocab),
		"tokenizer_2/merges.txt":            mergesFile(clipMerges),
		// SD3's second CLIP tokenizer pads with "!", id 0.
		"tokenizer_2/special_tokens_map.json": mustJSON(clipSpecials("!")),
		"tokenizer_3/tokenizer.json":          t5TokenizerJSON(t5Pieces),
		"tokenizer_3/spiece.model":            tokenizer.MarshalSentencePiece(t5Pieces, 2),
		"tokenizer_3/special_tokens_map.json": mustJSON(map[string]any{"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}),
	}
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("tiny export: %w", err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("tiny export: %w", err)
		}
	}
	return nil
}

var modelIndex = map[string]any{
	"_class_name":        "StableDiffusion3Pipeline",
	"_diffusers_version": "0.29.0",
	"_name_or_path":      "genq/tiny-sd3",
	"scheduler":          []string{"diffusers", "FlowMatchEulerDiscreteScheduler"},
	"text_encoder":       []string{"transformers", "CLIPTextModelWithProjection"},
	"text_encoder_2":     []string{"transformers", "CLIPTextModelWithProjection"},
	"text_encoder_3":     []string{"transformers", "T5EncoderModel"},
	"tokenizer":          []string{"transformers", "CLIPTokenizer"},
	"tokenizer_2":        []string{"transformers", "CLIPTokenizer"},
	"tokenizer_3":        []string{"transformers", "T5TokenizerFast"},
	"transformer":        []string{"diffusers", "SD3Transformer2DModel"},
	"vae":                []string{"diffusers", "AutoencoderKL"},
}

// clipVocabulary builds a CLIP vocabulary the way CLIP's is laid out: the
// 256 byte symbols, the same with the word-end mark, the merged symbols in
// merge order, then the two specials last.
func clipVocabulary() (map[string]int, [][2]string) {
	var symbols []string
	bytes := tokenizer.ByteSymbols()
	symbols = append(symbols, bytes...)
	for _, s := range bytes {
		symbols = append(symbols, s+tokenizer.CLIPWordEnd)
	}
	seen := map[[2]string]bool{}
	var merges [][2]string
	for _, w := range words {
		// Merge left to right: "cat" → c·a, ca·t</w>.
		chars := strings.Split(w, "")
		chars[len(chars)-1] += tokenizer.CLIPWordEnd
		left := chars[0]
		for _, right := range chars[1:] {
			m := [2]string{left, right}
			if !seen[m] {
				seen[m] = true
				merges = append(merges, m)
				symbols = append(symbols, left+right)
			}
			left += right
		}
	}
	symbols = append(symbols, tokenizer.CLIPStart, tokenizer.CLIPEnd)
	vocab := make(map[string]int, len(symbols))
	for _, s := range symbols {
		if _, dup := vocab[s]; !dup {
			vocab[s] = len(vocab)
		}
	}
	return vocab, merges
}

// clipConfig is the part of transformers' CLIPTextConfig a pipeline reads.
func clipConfig(width int) map[string]any {
	return map[string]any{"architectures": []string{"CLIPTextModelWithProjection"}, "hidden_size": width, "projection_dim": width, "num_hidden_layers": clipLayers, "max_position_embeddings": 77}
}

func mergesFile(merges [][2]string) []byte {
	var b strings.Builder
	b.WriteString("#version: 0.2\n")
	for _, m := range merges {
		fmt.Fprintf(&b, "%s %s\n", m[0], m[1])
	}
	return []byte(b.String())
}

func clipSpecials(pad string) map[string]any {
	return map[string]any{
		"bos_token": tokenizer.CLIPStart, "eos_token": tokenizer.CLIPEnd,
		"unk_token": tokenizer.CLIPEnd, "pad_token": pad,
	}
}

// t5Vocabulary is T5's layout (pad 0, end 1, unknown 2) with single
// characters and the whole words as pieces; longer pieces score better per
// character, as in a trained unigram model.
func t5Vocabulary() []tokenizer.Piece {
	pieces := []tokenizer.Piece{{Text: "<pad>", Special: true}, {Text: "</s>", Special: true}, {Text: "<unk>", Special: true}}
	pieces = append(pieces, tokenizer.Piece{Text: tokenizer.Metaspace, Score: -3})
	for c := ' ' + 1; c <= '~'; c++ {
		pieces = append(pieces, tokenizer.Piece{Text: string(c), Score: -5})
	}
	for _, w := range words {
		pieces = append(pieces, tokenizer.Piece{Text: tokenizer.Metaspace + w, Score: -2 - 0.1*float64(len(w))})
	}
	return pieces
}

func t5TokenizerJSON(pieces []tokenizer.Piece) []byte {
	vocab := make([][]any, len(pieces))
	var added []map[string]any
	for id, p := range pieces {
		vocab[id] = []any{p.Text, p.Score}
		if p.Special {
			added = append(added, map[string]any{"id": id, "content": p.Text, "special": true})
		}
	}
	return mustJSON(map[string]any{
		"version":       "1.0",
		"added_tokens":  added,
		"normalizer":    map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " {2,}"}, "content": " "},
		"pre_tokenizer": map[string]any{"type": "Metaspace", "replacement": tokenizer.Metaspace, "prepend_scheme": "always", "split": true},
		"model":         map[string]any{"type": "Unigram", "unk_id": 2, "vocab": vocab, "byte_fallback": false},
	})
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // only maps of plain values are marshalled here
	}
	return append(b, '\n')
}

// graph builds one ONNX graph: fp16 weights (as in an fp16 export) that are
// cast to fp32 for the arithmetic, because ONNX Runtime's CPU provider lacks
// fp16 kernels for most ops.
type graph struct {
	g   onnxproto.Graph
	rng *rand.Rand
	io  ioTypes
	n   int
}

// ioTypes are the element types of a graph's inputs and outputs.
type ioTypes struct {
	float onnxproto.DataType
	ids   onnxproto.DataType
}

func newGraph(name string, rng *rand.Rand, io ioTypes) *graph {
	return &graph{g: onnxproto.Graph{Name: name}, rng: rng, io: io}
}

// op adds a node with one output and returns that output's name.
func (b *graph) op(opType string, inputs []string, attrs ...onnxproto.Attr) string {
	b.n++
	out := fmt.Sprintf("%s_%d", strings.ToLower(opType), b.n)
	b.g.Nodes = append(b.g.Nodes, onnxproto.Node{Name: out, OpType: opType, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
	return out
}

// named adds a node whose output is a graph output.
func (b *graph) named(opType, out string, inputs []string, attrs ...onnxproto.Attr) {
	b.g.Nodes = append(b.g.Nodes, onnxproto.Node{Name: out, OpType: opType, Inputs: inputs, Outputs: []string{out}, Attrs: attrs})
}

// weight adds an fp16 initializer of normal(0, std) values and returns the
// name of its fp32 cast.
func (b *graph) weight(std float64, dims ...int64) string {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(b.rng.NormFloat64() * std)
	}
	b.n++
	name := fmt.Sprintf("weight_%d", b.n)
	b.g.Initializers = append(b.g.Initializers, onnxproto.Tensor{Name: name, Type: onnxproto.Float16, Dims: dims, Raw: half.Encode(vals)})
	return b.toFloat(name)
}

func (b *graph) ints(vals ...int64) string {
	b.n++
	name := fmt.Sprintf("const_%d", b.n)
	raw := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		for i := range 8 {
			raw = append(raw, byte(uint64(v)>>(8*i)))
		}
	}
	b.g.Initializers = append(b.g.Initializers, onnxproto.Tensor{Name: name, Type: onnxproto.Int64, Dims: []int64{int64(len(vals))}, Raw: raw})
	return name
}

func (b *graph) toFloat(x string) string {
	return b.op("Cast", []string{x}, onnxproto.IntAttr("to", int64(onnxproto.Float)))
}

// output casts x to the output float type as the graph output name.
func (b *graph) output(name, x string, dims ...onnxproto.Dim) {
	b.named("Cast", name, []string{x}, onnxproto.IntAttr("to", int64(b.io.float)))
	b.g.Outputs = append(b.g.Outputs, onnxproto.ValueInfo{Name: name, Type: b.io.float, Dims: dims})
}

func (b *graph) input(name string, typ onnxproto.DataType, dims ...onnxproto.Dim) {
	b.g.Inputs = append(b.g.Inputs, onnxproto.ValueInfo{Name: name, Type: typ, Dims: dims})
}

func (b *graph) model() []byte {
	return onnxproto.Model{Producer: "genq tinyexport", Opset: 17, Graph: b.g}.Marshal()
}

func param(name string) onnxproto.Dim { return onnxproto.Dim{Param: name} }
func fixed(n int64) onnxproto.Dim     { return onnxproto.Dim{Value: n} }

// clipLayers is how many residual layers the tiny CLIP has: hidden_states.0
// (the embeddings) to hidden_states.2.
const clipLayers = 2

// clipModel is a CLIPTextModelWithProjection as optimum exports it with
// hidden states: input_ids → text_embeds, last_hidden_state,
// hidden_states.0 … hidden_states.N.
func clipModel(b *graph, vocab int, width int64) []byte {
	b.input("input_ids", b.io.ids, param("batch_size"), param("sequence_length"))
	tokens := b.op("Gather", []string{b.weight(1, int64(vocab), width), "input_ids"})
	h := b.op("Add", []string{tokens, b.weight(0.3, 77, width)}) // position embeddings
	hidden := []string{h}
	for range clipLayers {
		mix := b.op("Tanh", []string{b.op("MatMul", []string{h, b.weight(1/float64(width), width, width)})})
		h = b.op("Add", []string{h, mix})
		hidden = append(hidden, h)
	}
	final := b.op("LayerNormalization", []string{h, b.weight(0.1, width), b.weight(0.1, width)}, onnxproto.IntAttr("axis", -1))
	pooled := b.op("ReduceMean", []string{final}, onnxproto.IntsAttr("axes", 1), onnxproto.IntAttr("keepdims", 0))
	// optimum declares text_embeds as [batch_size, sequence_length] (sic);
	// the tiny export copies that, so pipelines must cope with a free width.
	b.output("text_embeds", b.op("MatMul", []string{pooled, b.weight(1/float64(width), width, width)}), param("batch_size"), param("sequence_length"))
	b.output("last_hidden_state", final, param("batch_size"), param("sequence_length"), fixed(width))
	for i, hs := range hidden {
		b.output(fmt.Sprintf("hidden_states.%d", i), hs, param("batch_size"), param("sequence_length"), fixed(width))
	}
	return b.model()
}

// t5Model is a T5EncoderModel: input_ids → last_hidden_state.
func t5Model(b *graph, vocab int, width int64) []byte {
	b.input("input_ids", b.io.ids, param("batch_size"), param("sequence_length"))
	h := b.op("Gather", []string{b.weight(1, int64(vocab), width), "input_ids"})
	h = b.op("Add", []string{h, b.op("Tanh", []string{b.op("MatMul", []string{h, b.weight(1/float64(width), width, width)})})})
	b.output("last_hidden_state", h, param("batch_size"), param("sequence_length"), fixed(width))
	return b.model()
}

// transformerModel stands in for SD3Transformer2DModel: a velocity from the
// latents (a 3×3 convolution) conditioned on the prompt (mean of the
// sequence), the pooled projection and the timestep.
func transformerModel(b *graph) []byte {
	const c = LatentChannels
	pooledWidth := int64(ClipLWidth + ClipGWidth)
	b.input("hidden_states", b.io.float, param("batch_size"), fixed(c), param("height"), param("width"))
	b.input("encoder_hidden_states", b.io.float, param("batch_size"), param("sequence_length"), fixed(JointWidth))
	b.input("pooled_projections", b.io.float, param("batch_size"), fixed(pooledWidth))
	b.input("timestep", b.io.float, param("batch_size"))

	text := b.op("ReduceMean", []string{b.toFloat("encoder_hidden_states")}, onnxproto.IntsAttr("axes", 1), onnxproto.IntAttr("keepdims", 0))
	cond := b.op("MatMul", []string{text, b.weight(1, JointWidth, c)})
	cond = b.op("Add", []string{cond, b.op("MatMul", []string{b.toFloat("pooled_projections"), b.weight(1, pooledWidth, c)})})
	t := b.op("Unsqueeze", []string{b.toFloat("timestep"), b.ints(1)}) // [B,1]
	t = b.op("Mul", []string{t, b.weight(0.001, 1, c)})                // timesteps run to 1000
	cond = b.op("Unsqueeze", []string{b.op("Add", []string{cond, t}), b.ints(2, 3)})

	x := b.op("Conv", []string{b.toFloat("hidden_states"), b.weight(1/(3*float64(c)), c, c, 3, 3), b.weight(0.1, c)},
		onnxproto.IntsAttr("kernel_shape", 3, 3), onnxproto.IntsAttr("pads", 1, 1, 1, 1))
	v := b.op("Tanh", []string{b.op("Add", []string{x, cond})})
	b.output("out_hidden_states", v, param("batch_size"), fixed(c), param("height"), param("width"))
	return b.model()
}

// vaeDecoderModel upsamples by 8 the way a pixel shuffle does: a 1×1
// convolution to 3·8·8 channels, then DepthToSpace. Every output pixel is
// its own mix of the latent channels, so noisy latents give an image that
// does not compress, which is what tests of large results need.
func vaeDecoderModel(b *graph) []byte {
	const c, s = LatentChannels, VAEScale
	b.input("latent_sample", b.io.float, param("batch_size"), fixed(c), param("latent_height"), param("latent_width"))
	x := b.op("Conv", []string{b.toFloat("latent_sample"), b.weight(0.4, 3*s*s, c, 1, 1), b.weight(0.1, 3*s*s)},
		onnxproto.IntsAttr("kernel_shape", 1, 1))
	x = b.op("DepthToSpace", []string{x}, onnxproto.IntAttr("blocksize", s), onnxproto.StringAttr("mode", "CRD"))
	b.output("sample", b.op("Tanh", []string{x}), param("batch_size"), fixed(3), param("height"), param("width"))
	return b.model()
}
