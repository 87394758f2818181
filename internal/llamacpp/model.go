package llamacpp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hybridgroup/yzma/pkg/llama"
)

// ModelParams say where a model's weights go.
type ModelParams struct {
	// GPULayers is how many layers are offloaded to the GPU: 0 keeps the
	// model on the CPU, a negative number offloads every layer.
	GPULayers int
	// Device is the GPU to use, from Devices; nil lets the engine choose.
	Device *Device
	// Progress, when set, is told how far the engine's load is, from 0
	// to 1 (llama.cpp's progress_callback: the tensors placed, or copied
	// to the device); returning false stops the load, which then fails.
	Progress func(fraction float64) (keepGoing bool)
}

// Model is a loaded GGUF model and its vocabulary.
type Model struct {
	m     llama.Model
	vocab llama.Vocab
	Vocab *Vocab
}

// errLoadStopped is the error of a load its Progress stopped.
var errLoadStopped = errors.New("the load was stopped before it ended")

// OpenModel loads the model at path. A file llama.cpp cannot load (not
// GGUF, an architecture it lacks, too little memory) is an error that says
// what the engine logged.
func (lib *Library) OpenModel(path string, p ModelParams) (*Model, error) {
	mp := llama.ModelDefaultParams()
	mp.NGpuLayers = int32(p.GPULayers)
	if p.GPULayers < 0 {
		mp.NGpuLayers = -1
	}
	if p.Device != nil && p.Device.gpu >= 0 {
		// One GPU by its number, as llama-server's --split-mode none
		// --main-gpu N, not by a device list: yzma's SetDevices keeps a
		// pointer to Go memory the load reads, and with one the load
		// crashed on an H200 (docs/engine.md).
		mp.SplitMode, mp.MainGpu = llama.SplitModeNone, int32(p.Device.gpu)
	}
	stopped := false
	if p.Progress != nil {
		detach := lib.progress.attach(&mp, func(f float64) bool {
			stopped = !p.Progress(f)
			return !stopped
		})
		defer detach()
	}
	logs.takeErrors()
	m, err := llama.ModelLoadFromFile(path, mp)
	if stopped {
		if m != 0 {
			llama.ModelFree(m)
		}
		return nil, errLoadStopped
	}
	if err != nil || m == 0 {
		said := logs.takeErrors()
		for _, line := range said {
			// The one failure worth naming apart: a model of a family this
			// release of llama.cpp does not know.
			if _, arch, ok := strings.Cut(line, "unknown model architecture: "); ok {
				return nil, fmt.Errorf("architecture %s is not supported by the engine (llama.cpp %s)", strings.ReplaceAll(arch, "'", `"`), Version)
			}
		}
		msg := "llama.cpp could not load it"
		if len(said) > 0 {
			msg += ": " + strings.Join(said, "; ")
		}
		return nil, errors.New(msg)
	}
	model := &Model{m: m, vocab: llama.ModelGetVocab(m)}
	model.Vocab = newVocab(model.vocab)
	return model, nil
}

// Close frees the model.
func (m *Model) Close() {
	if m.m != 0 {
		llama.ModelFree(m.m)
		m.m = 0
	}
}

// Meta is a metadata value of the GGUF file, as a string.
func (m *Model) Meta(key string) (string, bool) { return llama.ModelMetaValStr(m.m, key) }

// Architecture is the GGUF general.architecture.
func (m *Model) Architecture() string {
	a, _ := m.Meta("general.architecture")
	return a
}

// ChatTemplate is the model's default Jinja chat template, or "".
func (m *Model) ChatTemplate() string {
	t, _ := m.Meta("tokenizer.chat_template")
	return t
}

// Params is the number of weights.
func (m *Model) Params() uint64 { return llama.ModelNParams(m.m) }

// Size is the weights' size in bytes.
func (m *Model) Size() uint64 { return llama.ModelSize(m.m) }

// Layers is the number of blocks.
func (m *Model) Layers() int { return int(llama.ModelNLayer(m.m)) }

// TrainedContext is the context length the model was trained with.
func (m *Model) TrainedContext() int { return int(llama.ModelNCtxTrain(m.m)) }

// KVBytesPerToken is the size of one token's keys and values in F16, over
// every layer: what a cell of the KV cache costs.
func (m *Model) KVBytesPerToken() uint64 {
	arch := m.Architecture()
	heads := uint64(llama.ModelNHead(m.m))
	kvHeads := uint64(llama.ModelNHeadKV(m.m))
	embd := uint64(llama.ModelNEmbd(m.m))
	if heads == 0 {
		return 0
	}
	keyDim, valueDim := embd/heads, embd/heads
	if v, ok := m.Meta(arch + ".attention.key_length"); ok {
		fmt.Sscan(v, &keyDim)
	}
	if v, ok := m.Meta(arch + ".attention.value_length"); ok {
		fmt.Sscan(v, &valueDim)
	}
	return uint64(m.Layers()) * kvHeads * (keyDim + valueDim) * 2
}

// TokenAttr is a token's attributes (llama_token_attr).
type TokenAttr = llama.TokenAttr

// Vocab is a model's vocabulary: ids, their texts and their kinds. Every
// token's piece is read once, at load, so decoding never calls the engine.
type Vocab struct {
	v      llama.Vocab
	pieces [][]byte // as the answer's text holds them: nothing for control tokens
	raw    [][]byte // every token's text, special ones included
	attrs  []TokenAttr
	byText map[string]int32 // the vocabulary's own strings (byte-level BPE's "Ġthe")
	eog    []bool
	nul    int32 // the token whose text is the byte 0, -1 when none
	BOS    int32 // -1 when none
	EOS    int32
	EOT    int32
	AddBOS bool
	AddEOS bool
}

func newVocab(v llama.Vocab) *Vocab {
	n := int(llama.VocabNTokens(v))
	vc := &Vocab{v: v, pieces: make([][]byte, n), raw: make([][]byte, n), attrs: make([]TokenAttr, n), eog: make([]bool, n),
		BOS: int32(llama.VocabBOS(v)), EOS: int32(llama.VocabEOS(v)), EOT: int32(llama.VocabEOT(v)), AddBOS: llama.VocabGetAddBOS(v),
		AddEOS: llama.VocabGetAddEOS(v), byText: make(map[string]int32, n), nul: -1}
	buf := make([]byte, 256)
	piece := func(id int, special bool) []byte {
		for {
			k := llama.TokenToPiece(v, llama.Token(id), buf, 0, special)
			if k < 0 {
				buf = make([]byte, -k)
				continue
			}
			return append([]byte(nil), buf[:k]...)
		}
	}
	for id := range n {
		vc.attrs[id] = llama.VocabGetAttr(v, llama.Token(id))
		vc.eog[id] = llama.VocabIsEOG(v, llama.Token(id))
		vc.pieces[id] = piece(id, false)
		vc.raw[id] = piece(id, true)
		if vc.nul < 0 && string(vc.pieces[id]) == "\x00" {
			vc.nul = int32(id)
		}
		if _, dup := vc.byText[llama.VocabGetText(v, llama.Token(id))]; !dup {
			vc.byText[llama.VocabGetText(v, llama.Token(id))] = int32(id)
		}
	}
	return vc
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.pieces) }

// Piece is the text token id adds to an answer: nothing for a control
// token. The slice is the vocabulary's own; do not change it.
func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

// Text is token id's text, a special token's included (its name).
func (v *Vocab) Text(id int32) []byte {
	if id < 0 || int(id) >= len(v.raw) {
		return nil
	}
	return v.raw[id]
}

// IsControl reports whether id is a control token: a special token that
// never belongs to an answer's text.
func (v *Vocab) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(v.attrs) && v.attrs[id]&llama.TokenAttrControl != 0
}

// IsEndOfGeneration reports whether id ends an answer (EOS, EOT and the
// others the model's metadata names).
func (v *Vocab) IsEndOfGeneration(id int32) bool {
	return id >= 0 && int(id) < len(v.eog) && v.eog[id]
}

// Lookup finds the id of the token the vocabulary stores as text, in its
// own form ("Ġthe" in a byte-level BPE, "▁the" in SentencePiece, a special
// token's name), or -1.
func (v *Vocab) Lookup(text string) int32 {
	if id, ok := v.byText[text]; ok {
		return id
	}
	return -1
}

// Tokenize turns text into token ids. addSpecial adds BOS (and EOS) as the
// model's metadata asks; parseSpecial reads special tokens' texts as those
// tokens (a rendered chat template holds them), where false reads them as
// plain text (a user's prompt). A NUL in text is written as the
// vocabulary's token for the byte 0.
func (v *Vocab) Tokenize(text string, addSpecial, parseSpecial bool) []int32 {
	if strings.IndexByte(text, 0) < 0 {
		return v.tokenize(text, addSpecial, parseSpecial)
	}
	// The engine reads text as a C string, which ends at a NUL, so the
	// parts between NULs are tokenized apart and joined by the byte's
	// token. NULs reach a prompt honestly: a tool's output of a binary
	// file, or a random model's answer that an agent sends back. A
	// vocabulary with no such token (byte-level BPE and SentencePiece's
	// byte fallback both have one) loses them.
	parts := strings.Split(text, "\x00")
	out := v.tokenize(parts[0], addSpecial, parseSpecial)
	eos := addSpecial && v.AddEOS && len(out) > 0 && out[len(out)-1] == v.EOS
	if eos {
		out = out[:len(out)-1]
	}
	for _, part := range parts[1:] {
		if v.nul >= 0 {
			out = append(out, v.nul)
		}
		out = append(out, v.tokenize(part, false, parseSpecial)...)
	}
	if eos {
		out = append(out, v.EOS)
	}
	return out
}

func (v *Vocab) tokenize(text string, addSpecial, parseSpecial bool) []int32 {
	if text == "" && !addSpecial {
		return nil
	}
	toks := llama.Tokenize(v.v, text, addSpecial, parseSpecial)
	out := make([]int32, len(toks))
	for i, t := range toks {
		out[i] = int32(t)
	}
	return out
}

// Detokenize is the text of ids, special tokens written out when special.
func (v *Vocab) Detokenize(ids []int32, special bool) string {
	var b strings.Builder
	for _, id := range ids {
		if special {
			b.Write(v.Text(id))
		} else {
			b.Write(v.Piece(id))
		}
	}
	return b.String()
}

// Widths are the model's hidden and feed-forward widths.
func (m *Model) Widths() (hidden, ffn uint64) {
	hidden = uint64(llama.ModelNEmbd(m.m))
	arch := m.Architecture()
	if v, ok := m.Meta(arch + ".feed_forward_length"); ok {
		fmt.Sscan(v, &ffn)
	}
	if ffn == 0 {
		ffn = 4 * hidden
	}
	return hidden, ffn
}
