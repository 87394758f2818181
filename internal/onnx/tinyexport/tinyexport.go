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

	"github.com/genq/genq/internal/diffusion/tokenizer"
	"github.com/genq/genq/internal/onnx/half"
	"github.com/genq/genq/internal/onnx/onnxproto"
	"github.com/genq/genq/internal/sd3"
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

// Pipeline names which diffusers pipeline the export is of.
type Pipeline string

const (
	SD3  Pipeline = "sd3"  // StableDiffusion3Pipeline: 3 text encoders, transformer
	SD15 Pipeline = "sd15" // StableDiffusionPipeline: CLIP-L, UNet
	SDXL Pipeline = "sdxl" // StableDiffusionXLPipeline: CLIP-L and CLIP-G, UNet
)

// Options vary the export. The zero value is what optimum writes for an
// fp16 SD3 export.
type Options struct {
	Pipeline Pipeline // default SD3
	// Float32 makes every float input and output fp32 (weights stay fp16),
	// to test that a pipeline reads dtypes from the graphs.
	Float32 bool
	// Int32IDs makes the text encoders take int32 token ids.
	Int32IDs bool
	// Faithful writes every SD3 part in its real architecture at tiny
	// widths (sd3.TinyVAE, sd3.TinyMMDiT, sd3.TinyCLIP, sd3.TinyT5), and the
	// same weights as GGUF files (sd3.VAEDecoderFile and its neighbours)
	// for the ggml engine, so the two can be compared. The default
	// stand-ins are cheaper and make images that do not compress, which
	// tests of large results need.
	Faithful bool
	// GGMLWeights is how the GGUF file stores matrices and kernels
	// (default f16).
	GGMLWeights sd3.DType
	// MMDiT and VAE replace the faithful transformer's and VAE's tiny
	// shapes (benchmarks write larger ones); the transformer keeps the tiny
	// text widths.
	MMDiT *sd3.MMDiTConfig
	VAE   *sd3.VAEConfig
}

// UNetLatentChannels is the latent width of SD 1.5 and SDXL.
const UNetLatentChannels = 4

// Write writes the fp16 SD3 export into dir (created if needed). The same
// seed writes the same bytes.
func Write(dir string, seed int64) error {
	return WriteWithOptions(dir, seed, Options{})
}

// WriteWithOptions writes an export as opts say; the same seed gives the
// same weights whatever the dtypes.
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
	clipFiles := func(dir, pad string) map[string][]byte {
		return map[string][]byte{
			dir + "/vocab.json":              mustJSON(clipVocab),
			dir + "/merges.txt":              mergesFile(clipMerges),
			dir + "/special_tokens_map.json": mustJSON(clipSpecials(pad)),
		}
	}
	files := map[string][]byte{}
	add := func(more map[string][]byte) {
		for k, v := range more {
			files[k] = v
		}
	}
	switch opts.Pipeline {
	case SD3, "":
		t5Pieces := t5Vocabulary()
		add(map[string][]byte{
			"model_index.json":                    mustJSON(modelIndex(SD3)),
			"scheduler/scheduler_config.json":     mustJSON(map[string]any{"_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 3.0}),
			"vae_decoder/config.json":             mustJSON(vaeConfig(LatentChannels, 1.5305, 0.0609)),
			"text_encoder/model.onnx":             clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipLWidth, true),
			"text_encoder_2/model.onnx":           clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipGWidth, true),
			"text_encoder_3/model.onnx":           t5Model(newGraph("tiny_t5_encoder", rng, io), len(t5Pieces), JointWidth),
			"transformer/model.onnx":              denoiserModel(newGraph("tiny_sd3_transformer", rng, io), sd3Denoiser),
			"vae_decoder/model.onnx":              vaeDecoderModel(newGraph("tiny_vae_decoder", rng, io), LatentChannels),
			"text_encoder/config.json":            mustJSON(clipConfig(ClipLWidth)),
			"text_encoder_2/config.json":          mustJSON(clipConfig(ClipGWidth)),
			"tokenizer_3/tokenizer.json":          t5TokenizerJSON(t5Pieces),
			"tokenizer_3/spiece.model":            tokenizer.MarshalSentencePiece(t5Pieces, 2),
			"tokenizer_3/special_tokens_map.json": mustJSON(map[string]any{"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}),
		})
		add(clipFiles("tokenizer", tokenizer.CLIPEnd))
		add(clipFiles("tokenizer_2", "!")) // SD3's second CLIP tokenizer pads with "!", id 0
	case SD15:
		add(map[string][]byte{
			"model_index.json":                mustJSON(modelIndex(SD15)),
			"scheduler/scheduler_config.json": mustJSON(map[string]any{"_class_name": "PNDMScheduler", "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "num_train_timesteps": 1000, "steps_offset": 1, "skip_prk_steps": true}),
			"vae_decoder/config.json":         mustJSON(vaeConfig(UNetLatentChannels, 0.18215, nil)),
			"text_encoder/model.onnx":         clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipLWidth, false),
			"unet/model.onnx":                 denoiserModel(newGraph("tiny_unet", rng, io), sd15Denoiser),
			"vae_decoder/model.onnx":          vaeDecoderModel(newGraph("tiny_vae_decoder", rng, io), UNetLatentChannels),
		})
		add(clipFiles("tokenizer", tokenizer.CLIPEnd))
	case SDXL:
		add(map[string][]byte{
			"model_index.json":                mustJSON(modelIndex(SDXL)),
			"scheduler/scheduler_config.json": mustJSON(map[string]any{"_class_name": "EulerDiscreteScheduler", "beta_start": 0.00085, "beta_end": 0.012, "beta_schedule": "scaled_linear", "num_train_timesteps": 1000, "steps_offset": 1, "timestep_spacing": "leading"}),
			"vae_decoder/config.json":         mustJSON(vaeConfig(UNetLatentChannels, 0.13025, nil)),
			"text_encoder/model.onnx":         clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipLWidth, false),
			"text_encoder_2/model.onnx":       clipModel(newGraph("tiny_clip_text_model", rng, io), len(clipVocab), ClipGWidth, true),
			"text_encoder_2/config.json":      mustJSON(clipConfig(ClipGWidth)),
			"unet/model.onnx":                 denoiserModel(newGraph("tiny_unet", rng, io), sdxlDenoiser),
			"vae_decoder/model.onnx":          vaeDecoderModel(newGraph("tiny_vae_decoder", rng, io), UNetLatentChannels),
		})
		add(clipFiles("tokenizer", tokenizer.CLIPEnd))
		add(clipFiles("tokenizer_2", "!"))
	default:
		return fmt.Errorf("tiny export: unknown pipeline %q", opts.Pipeline)
	}
	faithful := opts.Faithful && (opts.Pipeline == SD3 || opts.Pipeline == "")
	vae, mmdit, t5 := sd3.TinyVAE(), sd3.TinyMMDiT(), sd3.TinyT5(len(t5Vocabulary()), JointWidth)
	if opts.MMDiT != nil {
		mmdit = *opts.MMDiT
	}
	if opts.VAE != nil {
		vae = *opts.VAE
	}
	// The two CLIPs share their tensor names: each draws from its own seed.
	clips := []struct {
		part, file string
		cfg        sd3.CLIPConfig
		seed       int64
	}{
		{"text_encoder", sd3.ClipLFile, sd3.TinyCLIP(len(clipVocab), ClipLWidth, true), seed},
		{"text_encoder_2", sd3.ClipGFile, sd3.TinyCLIP(len(clipVocab), ClipGWidth, false), seed + 1},
	}
	if faithful {
		files["vae_decoder/model.onnx"] = sd3VAEDecoderModel(newGraph("tiny_sd3_vae_decoder", rng, io), vae, vaeWeights(vae, seed))
		files["vae_decoder/config.json"] = mustJSON(vaeConfig(vae.LatentChannels, vae.Scaling, vae.Shift))
		files["transformer/model.onnx"] = sd3TransformerModel(newGraph("tiny_sd3_transformer", rng, io), mmdit, mmdit.RandomMMDiTWeights(seed))
		for _, c := range clips {
			files[c.part+"/model.onnx"] = sd3CLIPModel(newGraph("tiny_clip_text_model", rng, io), c.cfg, sd3.RandomWeights(c.cfg.CLIPTensors(), c.seed))
		}
		files["text_encoder_3/model.onnx"] = sd3T5Model(newGraph("tiny_t5_encoder", rng, io), t5, sd3.RandomWeights(t5.T5Tensors(), seed))
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
	if faithful {
		dtype := opts.GGMLWeights
		if dtype == "" {
			dtype = sd3.F16
		}
		if err := sd3.WriteGGUF(filepath.Join(dir, sd3.VAEDecoderFile), sd3.ArchVAE, vae.VAEMetadata(), vae.VAEDecoderTensors(), vaeWeights(vae, seed), dtype); err != nil {
			return fmt.Errorf("tiny export: %w", err)
		}
		if err := sd3.WriteGGUF(filepath.Join(dir, sd3.TransformerFile), sd3.ArchMMDiT, mmdit.MMDiTMetadata(), mmdit.MMDiTTensors(), mmdit.RandomMMDiTWeights(seed), dtype); err != nil {
			return fmt.Errorf("tiny export: %w", err)
		}
		if err := sd3.WriteGGUF(filepath.Join(dir, sd3.T5File), sd3.ArchT5, t5.T5Metadata(), t5.T5Tensors(), sd3.RandomWeights(t5.T5Tensors(), seed), dtype); err != nil {
			return fmt.Errorf("tiny export: %w", err)
		}
		for _, c := range clips {
			specs := c.cfg.CLIPTensors()
			if err := sd3.WriteGGUF(filepath.Join(dir, c.file), sd3.ArchCLIP, c.cfg.CLIPMetadata(), specs, sd3.RandomWeights(specs, c.seed), dtype); err != nil {
				return fmt.Errorf("tiny export: %w", err)
			}
		}
	}
	return nil
}

// vaeWeights are the faithful VAE decoder's weights, the same for both
// engines.
func vaeWeights(cfg sd3.VAEConfig, seed int64) sd3.Weights {
	return sd3.RandomWeights(cfg.VAEDecoderTensors(), seed)
}

func vaeConfig(channels int, scaling float64, shift any) map[string]any {
	return map[string]any{"_class_name": "AutoencoderKL", "latent_channels": channels, "scaling_factor": scaling, "shift_factor": shift}
}

func modelIndex(p Pipeline) map[string]any {
	clip := []string{"transformers", "CLIPTextModel"}
	clipProj := []string{"transformers", "CLIPTextModelWithProjection"}
	tok := []string{"transformers", "CLIPTokenizer"}
	index := map[string]any{
		"_diffusers_version": "0.29.0",
		"_name_or_path":      "genq/tiny-" + string(p),
		"tokenizer":          tok,
		"vae":                []string{"diffusers", "AutoencoderKL"},
	}
	switch p {
	case SD3:
		index["_class_name"] = "StableDiffusion3Pipeline"
		index["scheduler"] = []string{"diffusers", "FlowMatchEulerDiscreteScheduler"}
		index["text_encoder"], index["text_encoder_2"] = clipProj, clipProj
		index["text_encoder_3"] = []string{"transformers", "T5EncoderModel"}
		index["tokenizer_2"], index["tokenizer_3"] = tok, []string{"transformers", "T5TokenizerFast"}
		index["transformer"] = []string{"diffusers", "SD3Transformer2DModel"}
	case SD15:
		index["_class_name"] = "StableDiffusionPipeline"
		index["scheduler"] = []string{"diffusers", "PNDMScheduler"}
		index["text_encoder"] = clip
		index["unet"] = []string{"diffusers", "UNet2DConditionModel"}
	case SDXL:
		index["_class_name"] = "StableDiffusionXLPipeline"
		index["force_zeros_for_empty_prompt"] = true // moot: genq's negative prompt is "", not None
		index["scheduler"] = []string{"diffusers", "EulerDiscreteScheduler"}
		index["text_encoder"], index["text_encoder_2"] = clip, clipProj
		index["tokenizer_2"] = tok
		index["unet"] = []string{"diffusers", "UNet2DConditionModel"}
	}
	return index
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

// clipModel is a CLIPTextModelWithProjection (input_ids → text_embeds,
// last_hidden_state) or a CLIPTextModel (→ last_hidden_state,
// pooler_output), as optimum exports them with hidden states:
// hidden_states.0 … hidden_states.N.
func clipModel(b *graph, vocab int, width int64, withProjection bool) []byte {
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
	if withProjection {
		// optimum declares text_embeds as [batch_size, sequence_length] (sic);
		// the tiny export copies that, so pipelines must cope with a free width.
		b.output("text_embeds", b.op("MatMul", []string{pooled, b.weight(1/float64(width), width, width)}), param("batch_size"), param("sequence_length"))
		b.output("last_hidden_state", final, param("batch_size"), param("sequence_length"), fixed(width))
	} else { // CLIPTextModel
		b.output("last_hidden_state", final, param("batch_size"), param("sequence_length"), fixed(width))
		b.output("pooler_output", pooled, param("batch_size"), fixed(width))
	}
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

// denoiserIO names a denoiser's inputs and output and sets their shapes.
type denoiserIO struct {
	latent, text, pooled, timeIDs, timestep, out string
	channels, textWidth, pooledWidth             int64
	timestepRank                                 int
	timestepType                                 onnxproto.DataType // 0: the float type of the graph
}

var (
	sd3Denoiser = denoiserIO{
		latent: "hidden_states", text: "encoder_hidden_states", pooled: "pooled_projections", timestep: "timestep", out: "out_hidden_states",
		channels: LatentChannels, textWidth: JointWidth, pooledWidth: ClipLWidth + ClipGWidth, timestepRank: 1,
	}
	// optimum declares the UNet's timestep a scalar; SD 1.5 exports take it
	// as int64.
	sd15Denoiser = denoiserIO{
		latent: "sample", text: "encoder_hidden_states", timestep: "timestep", out: "out_sample",
		channels: UNetLatentChannels, textWidth: ClipLWidth, timestepRank: 0, timestepType: onnxproto.Int64,
	}
	sdxlDenoiser = denoiserIO{
		latent: "sample", text: "encoder_hidden_states", pooled: "text_embeds", timeIDs: "time_ids", timestep: "timestep", out: "out_sample",
		channels: UNetLatentChannels, textWidth: ClipLWidth + ClipGWidth, pooledWidth: ClipGWidth, timestepRank: 1,
	}
)

// denoiserModel stands in for SD3Transformer2DModel or UNet2DConditionModel:
// a prediction from the latents (a 3×3 convolution) conditioned on the
// prompt (mean of the sequence), the pooled embedding, the size ids and the
// timestep.
func denoiserModel(b *graph, io denoiserIO) []byte {
	c := io.channels
	b.input(io.latent, b.io.float, param("batch_size"), fixed(c), param("height"), param("width"))
	b.input(io.text, b.io.float, param("batch_size"), param("sequence_length"), fixed(io.textWidth))
	text := b.op("ReduceMean", []string{b.toFloat(io.text)}, onnxproto.IntsAttr("axes", 1), onnxproto.IntAttr("keepdims", 0))
	cond := b.op("MatMul", []string{text, b.weight(1, io.textWidth, c)})
	if io.pooled != "" {
		b.input(io.pooled, b.io.float, param("batch_size"), fixed(io.pooledWidth))
		cond = b.op("Add", []string{cond, b.op("MatMul", []string{b.toFloat(io.pooled), b.weight(1, io.pooledWidth, c)})})
	}
	if io.timeIDs != "" {
		b.input(io.timeIDs, b.io.float, param("batch_size"), fixed(6))
		// Sizes run to a thousand or so.
		cond = b.op("Add", []string{cond, b.op("MatMul", []string{b.toFloat(io.timeIDs), b.weight(0.001, 6, c)})})
	}
	tsType := io.timestepType
	if tsType == 0 {
		tsType = b.io.float
	}
	var t string
	if io.timestepRank == 0 {
		b.input(io.timestep, tsType)
		t = b.op("Reshape", []string{b.toFloat(io.timestep), b.ints(1, 1)}) // broadcasts over the batch
	} else {
		b.input(io.timestep, tsType, param("step"))
		t = b.op("Unsqueeze", []string{b.toFloat(io.timestep), b.ints(1)}) // [B,1]
	}
	t = b.op("Mul", []string{t, b.weight(0.001, 1, c)}) // timesteps run to 1000
	cond = b.op("Unsqueeze", []string{b.op("Add", []string{cond, t}), b.ints(2, 3)})

	x := b.op("Conv", []string{b.toFloat(io.latent), b.weight(1/(3*float64(c)), c, c, 3, 3), b.weight(0.1, c)},
		onnxproto.IntsAttr("kernel_shape", 3, 3), onnxproto.IntsAttr("pads", 1, 1, 1, 1))
	v := b.op("Tanh", []string{b.op("Add", []string{x, cond})})
	b.output(io.out, v, param("batch_size"), fixed(c), param("height"), param("width"))
	return b.model()
}

// vaeDecoderModel upsamples by 8 the way a pixel shuffle does: a 1×1
// convolution to 3·8·8 channels, then DepthToSpace. Every output pixel is
// its own mix of the latent channels, so noisy latents give an image that
// does not compress, which is what tests of large results need.
func vaeDecoderModel(b *graph, c int64) []byte {
	const s = VAEScale
	b.input("latent_sample", b.io.float, param("batch_size"), fixed(c), param("latent_height"), param("latent_width"))
	x := b.op("Conv", []string{b.toFloat("latent_sample"), b.weight(0.4, 3*s*s, c, 1, 1), b.weight(0.1, 3*s*s)},
		onnxproto.IntsAttr("kernel_shape", 1, 1))
	x = b.op("DepthToSpace", []string{x}, onnxproto.IntAttr("blocksize", s), onnxproto.StringAttr("mode", "CRD"))
	b.output("sample", b.op("Tanh", []string{x}), param("batch_size"), fixed(3), param("height"), param("width"))
	return b.model()
}
