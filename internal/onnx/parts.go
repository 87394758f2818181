package onnx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// Element types the pipeline can feed and read.
var (
	floatTypes = []ort.TensorElementDataType{ort.TensorElementDataTypeFloat, ort.TensorElementDataTypeFloat16}
	intTypes   = []ort.TensorElementDataType{ort.TensorElementDataTypeInt64, ort.TensorElementDataTypeInt32}
	// SD3 exports take the timestep as a float; some older UNet exports as
	// an integer.
	timestepTypes = append(slices.Clone(floatTypes), ort.TensorElementDataTypeInt64)
)

// rankScalarOrBatch is a tensorSpec rank that accepts a scalar or a vector
// (UNet exports declare the timestep a scalar, SD3's one per batch item).
const rankScalarOrBatch = -1

// tensorSpec is what the pipeline needs of one input or output.
type tensorSpec struct {
	name  string
	rank  int
	types []ort.TensorElementDataType
}

// model is one ONNX file of the export, its inputs and outputs as the file
// itself declares them.
type model struct {
	part    string // directory name in the export, e.g. "text_encoder_2"
	path    string
	inputs  map[string]ort.InputOutputInfo
	outputs map[string]ort.InputOutputInfo
	order   []string // input names in declaration order
	// widths fills the last dimension of outputs whose graph leaves it
	// free: optimum declares CLIP's text_embeds as [batch, sequence_length].
	widths map[string]int64
}

// inspectModel reads a part's input and output declarations without
// running it.
func inspectModel(dir, part string) (*model, error) {
	path := filepath.Join(dir, part, "model.onnx")
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing %s", part, path)
		}
		return nil, fmt.Errorf("%s: %w", part, err)
	}
	ins, outs, err := inputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", part, path, err)
	}
	m := &model{part: part, path: path, inputs: map[string]ort.InputOutputInfo{}, outputs: map[string]ort.InputOutputInfo{}, widths: map[string]int64{}}
	for _, in := range ins {
		m.inputs[in.Name] = in
		m.order = append(m.order, in.Name)
	}
	for _, out := range outs {
		m.outputs[out.Name] = out
	}
	return m, nil
}

// inputOutputInfo reads a model's declared inputs and outputs. ORT builds a
// throw-away session for it; with graph optimisation off and on the CPU that
// costs little more than reading the file.
func inputOutputInfo(path string) ([]ort.InputOutputInfo, []ort.InputOutputInfo, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, err
	}
	defer opts.Destroy()
	if err := opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, err
	}
	return ort.GetInputOutputInfoWithOptions(path, opts)
}

// check verifies that the model takes exactly the wanted inputs and has
// the wanted outputs, with their ranks and element types.
func (m *model) check(inputs, outputs []tensorSpec) error {
	var problems []string
	for _, spec := range inputs {
		problems = append(problems, checkTensor("input", m.inputs, spec)...)
	}
	for _, name := range m.order {
		if !slices.ContainsFunc(inputs, func(s tensorSpec) bool { return s.name == name }) {
			problems = append(problems, fmt.Sprintf("unexpected input %q that the pipeline does not feed", name))
		}
	}
	for _, spec := range outputs {
		problems = append(problems, checkTensor("output", m.outputs, spec)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (%s): %s", m.part, m.path, strings.Join(problems, "; "))
	}
	return nil
}

func checkTensor(kind string, have map[string]ort.InputOutputInfo, spec tensorSpec) []string {
	info, ok := have[spec.name]
	if !ok {
		return []string{fmt.Sprintf("no %s %q (it has %s)", kind, spec.name, strings.Join(sortedKeys(have), ", "))}
	}
	var problems []string
	if info.OrtValueType != ort.ONNXTypeTensor {
		return []string{fmt.Sprintf("%s %q is a %v, want a tensor", kind, spec.name, info.OrtValueType)}
	}
	if rank := len(info.Dimensions); rank != spec.rank && (spec.rank != rankScalarOrBatch || rank > 1) {
		problems = append(problems, fmt.Sprintf("%s %q has shape %v, want rank %d", kind, spec.name, info.Dimensions, spec.rank))
	}
	if !slices.Contains(spec.types, info.DataType) {
		problems = append(problems, fmt.Sprintf("%s %q is %v, want one of %v", kind, spec.name, info.DataType, spec.types))
	}
	return problems
}

// dim returns a declared dimension, or -1 when it is free (named) or the
// model (which may be nil) lacks the tensor.
func (m *model) dim(name string, axis int) int64 {
	if m == nil {
		return -1
	}
	info, ok := m.inputs[name]
	if !ok {
		info = m.outputs[name]
	}
	if axis >= len(info.Dimensions) || info.Dimensions[axis] <= 0 {
		return -1
	}
	return info.Dimensions[axis]
}

// projectionDim reads projection_dim from the part's config.json (optimum
// copies the transformers config there); 0 when absent.
func (m *model) projectionDim() int64 {
	var cfg struct {
		ProjectionDim int64 `json:"projection_dim"`
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(m.path), "config.json"))
	if err != nil || json.Unmarshal(raw, &cfg) != nil {
		return 0
	}
	return cfg.ProjectionDim
}

func (m *model) inputType(name string) ort.TensorElementDataType { return m.inputs[name].DataType }

// penultimateHiddenState names the output SD3 takes from a CLIP encoder:
// hidden_states[-2], the input of its last layer.
func (m *model) penultimateHiddenState() (string, error) {
	last := -1
	for name := range m.outputs {
		if n, ok := strings.CutPrefix(name, "hidden_states."); ok {
			if i, err := strconv.Atoi(n); err == nil {
				last = max(last, i)
			}
		}
	}
	if last < 1 {
		return "", fmt.Errorf("%s (%s): no hidden_states.N outputs (export the text encoder with its hidden states)", m.part, m.path)
	}
	return fmt.Sprintf("hidden_states.%d", last-1), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
