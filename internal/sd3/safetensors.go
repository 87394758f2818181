package sd3

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/x448/float16"
)

// Safetensors is a set of safetensors files (one part's shards) opened for
// reading tensors by name.
type Safetensors struct {
	files   []*os.File
	tensors map[string]stEntry
}

type stEntry struct {
	file  *os.File
	base  int64 // where the file's data starts
	DType string
	Shape []int
	Begin int64 `json:"-"`
	End   int64 `json:"-"`
}

// OpenSafetensors opens every *.safetensors file in dir.
func OpenSafetensors(dir string) (*Safetensors, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("%s: no .safetensors files", dir)
	}
	sort.Strings(paths)
	s := &Safetensors{tensors: map[string]stEntry{}}
	for _, p := range paths {
		if err := s.add(p); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

func (s *Safetensors) add(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	s.files = append(s.files, f)
	var n uint64
	if err := binary.Read(f, binary.LittleEndian, &n); err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	if n > 100<<20 {
		return fmt.Errorf("%s: header of %d bytes is not a safetensors header", path, n)
	}
	raw := make([]byte, n)
	if _, err := f.ReadAt(raw, 8); err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	var header map[string]json.RawMessage
	if err := json.Unmarshal(raw, &header); err != nil {
		return fmt.Errorf("%s: header: %w", path, err)
	}
	for name, msg := range header {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType   string  `json:"dtype"`
			Shape   []int   `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil || len(e.Offsets) != 2 {
			return fmt.Errorf("%s: tensor %s: bad header entry", path, name)
		}
		s.tensors[name] = stEntry{file: f, base: 8 + int64(n), DType: e.DType, Shape: e.Shape, Begin: e.Offsets[0], End: e.Offsets[1]}
	}
	return nil
}

// Close closes the files.
func (s *Safetensors) Close() {
	for _, f := range s.files {
		f.Close()
	}
}

// Has tells whether a tensor is there.
func (s *Safetensors) Has(name string) bool { _, ok := s.tensors[name]; return ok }

// Shape is a tensor's shape, nil when absent.
func (s *Safetensors) Shape(name string) []int { return slices.Clone(s.tensors[name].Shape) }

// Values reads a tensor as float32 (from F32, F16 or BF16).
func (s *Safetensors) Values(name string) ([]float32, error) {
	e, ok := s.tensors[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	n := 1
	for _, d := range e.Shape {
		n *= d
	}
	size := map[string]int{"F32": 4, "F16": 2, "BF16": 2}[e.DType]
	if size == 0 {
		return nil, fmt.Errorf("tensor %s: dtype %s, want F32, F16 or BF16", name, e.DType)
	}
	if e.End-e.Begin != int64(n*size) {
		return nil, fmt.Errorf("tensor %s: %d bytes for shape %v in %s", name, e.End-e.Begin, e.Shape, e.DType)
	}
	raw := make([]byte, e.End-e.Begin)
	if _, err := e.file.ReadAt(raw, e.base+e.Begin); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	out := make([]float32, n)
	for i := range out {
		switch e.DType {
		case "F32":
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		case "F16":
			out[i] = float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32()
		case "BF16":
			out[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
		}
	}
	return out, nil
}

// WriteSafetensors writes weights as one safetensors file in F16 or F32,
// as diffusers saves them (tests write the real layout with it).
func WriteSafetensors(path string, w Weights, dtype DType) error {
	names := make([]string, 0, len(w))
	for n := range w {
		names = append(names, n)
	}
	sort.Strings(names)
	header := map[string]any{}
	var data []byte
	st := map[DType]string{F16: "F16", F32: "F32"}[dtype]
	for _, n := range names {
		t := w[n]
		begin := len(data)
		for _, v := range t.Data {
			if dtype == F16 {
				data = binary.LittleEndian.AppendUint16(data, float16.Fromfloat32(v).Bits())
			} else {
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v))
			}
		}
		header[n] = map[string]any{"dtype": st, "shape": t.Shape, "data_offsets": []int{begin, len(data)}}
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	out = append(append(out, h...), data...)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
