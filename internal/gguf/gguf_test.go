package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// buffer is an in-memory io.WriterAt, safe for the parallel writes to
// disjoint ranges that io.WriterAt allows.
type buffer struct {
	mu sync.Mutex
	b  []byte
}

func (w *buffer) WriteAt(p []byte, off int64) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end := int(off) + len(p); end > len(w.b) {
		w.b = append(w.b, make([]byte, end-len(w.b))...)
	}
	return copy(w.b[off:], p), nil
}

func write(t *testing.T, meta []KV, tensors []Tensor) []byte {
	t.Helper()
	var w buffer
	if err := Write(&w, meta, tensors); err != nil {
		t.Fatal(err)
	}
	return w.b
}

func read(t *testing.T, b []byte) *File {
	t.Helper()
	f, err := Read(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// raw is a tensor's given bytes.
type raw []byte

func (r raw) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r)
	return int64(n), err
}

// TestWriteLayout checks a small file byte by byte against the layout the
// format defines, written out here by hand rather than by the package's
// own reader.
func TestWriteLayout(t *testing.T) {
	got := write(t,
		[]KV{{"general.architecture", "x"}, {"x.n", uint32(7)}, {"x.ids", []int32{-1, 2}}},
		[]Tensor{
			{Name: "a", Type: TensorF32, Shape: []uint64{3}, Data: raw(bytes.Repeat([]byte{0xaa}, 12))},
			{Name: "b", Type: TensorF16, Shape: []uint64{2, 1}, Data: raw([]byte{1, 2, 3, 4})},
		})
	le := binary.LittleEndian
	var want []byte
	str := func(s string) { want = le.AppendUint64(want, uint64(len(s))); want = append(want, s...) }
	want = append(want, "GGUF"...)
	want = le.AppendUint32(want, 3)
	want = le.AppendUint64(want, 2) // tensors
	want = le.AppendUint64(want, 3) // metadata entries
	str("general.architecture")
	want = le.AppendUint32(want, 8)
	str("x")
	str("x.n")
	want = le.AppendUint32(want, 4)
	want = le.AppendUint32(want, 7)
	str("x.ids")
	want = le.AppendUint32(want, 9)
	want = le.AppendUint32(want, 5)
	want = le.AppendUint64(want, 2)
	want = le.AppendUint32(want, math.MaxUint32) // -1
	want = le.AppendUint32(want, 2)
	str("a")
	want = le.AppendUint32(want, 1)
	want = le.AppendUint64(want, 3)
	want = le.AppendUint32(want, 0)
	want = le.AppendUint64(want, 0)
	str("b")
	want = le.AppendUint32(want, 2)
	want = le.AppendUint64(want, 2)
	want = le.AppendUint64(want, 1)
	want = le.AppendUint32(want, 1)
	want = le.AppendUint64(want, 32) // a's 12 bytes, padded to 32
	for len(want)%32 != 0 {
		want = append(want, 0)
	}
	want = append(want, bytes.Repeat([]byte{0xaa}, 12)...)
	want = append(want, make([]byte, 20)...)
	want = append(want, 1, 2, 3, 4)
	want = append(want, make([]byte, 28)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("wrote\n%x\nwant\n%x", got, want)
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	type name string // a named string type is a string
	meta := []KV{
		{"u8", uint8(200)}, {"i8", int8(-3)}, {"u16", uint16(60000)}, {"i16", int16(-300)},
		{"u32", uint32(4e9)}, {"i32", int32(-2e9)}, {"f32", float32(1.5)}, {"bool", true},
		{"str", "héllo"}, {"u64", uint64(1) << 60}, {"i64", int64(-1) << 60}, {"f64", math.Pi},
		{"named", name("llama")}, {"empty", ""}, {"false", false},
		{"a.u8", []uint8{1, 2}}, {"a.i8", []int8{-1}}, {"a.u16", []uint16{9}}, {"a.i16", []int16{-9}},
		{"a.u32", []uint32{1, 2, 3}}, {"a.i32", []int32{-1, 0, 1}}, {"a.f32", []float32{0.5, -2}},
		{"a.bool", []bool{true, false}}, {"a.str", []string{"a", "", "ĠĊ"}}, {"a.u64", []uint64{1 << 40}},
		{"a.i64", []int64{-1 << 40}}, {"a.f64", []float64{1e-300}}, {"a.empty", []string{}},
		{"a.nested", [][]int32{{1, 2}, {}, {3}}}, {"a.nested.str", [][]string{{"x"}, {"y", "z"}}},
	}
	f := read(t, write(t, meta, nil))
	if f.Version != 3 || len(f.Meta) != len(meta) {
		t.Fatalf("version %d, %d entries; want 3 and %d", f.Version, len(f.Meta), len(meta))
	}
	for i, kv := range meta {
		want := kv.Value
		switch v := want.(type) {
		case name:
			want = string(v)
		case [][]int32:
			want = []any{v[0], v[1], v[2]}
		case [][]string:
			want = []any{v[0], v[1]}
		}
		if got := f.Meta[i]; got.Key != kv.Key || !reflect.DeepEqual(got.Value, want) {
			t.Errorf("entry %d: %s = %#v, want %s = %#v", i, got.Key, got.Value, kv.Key, want)
		}
	}
	if f.Value("u32") != uint32(4e9) || f.Value("absent") != nil {
		t.Errorf("Value: %v and %v", f.Value("u32"), f.Value("absent"))
	}
}

func TestTensorsAreAligned(t *testing.T) {
	for _, align := range []uint32{0, 32, 64, 4096} {
		var meta []KV
		if align != 0 {
			meta = []KV{{"general.alignment", align}}
		}
		ts := []Tensor{
			{Name: "q", Type: TensorQ4_0, Shape: []uint64{64, 3}, Data: raw(bytes.Repeat([]byte{1}, 6*18))},
			{Name: "n", Type: TensorF32, Shape: []uint64{5}, Data: raw(bytes.Repeat([]byte{2}, 20))},
			{Name: "h", Type: TensorBF16, Shape: []uint64{3, 2, 2}, Data: raw(bytes.Repeat([]byte{3}, 24))},
			{Name: "z", Type: TensorQ8_0, Shape: []uint64{32}, Data: raw(bytes.Repeat([]byte{4}, 34))},
		}
		b := write(t, meta, ts)
		f := read(t, b)
		want := uint64(max(align, DefaultAlignment))
		if f.Alignment != want || f.DataOffset%want != 0 {
			t.Fatalf("alignment %d: read alignment %d, data at %d", align, f.Alignment, f.DataOffset)
		}
		if uint64(len(b))%want != 0 {
			t.Errorf("alignment %d: the file is %d bytes, not padded to a multiple", align, len(b))
		}
		for i, ti := range f.Tensors {
			src := ts[i]
			if ti.Name != src.Name || ti.Type != src.Type || !reflect.DeepEqual(ti.Shape, src.Shape) {
				t.Errorf("tensor %d reads back as %+v, want %s %s %v", i, ti, src.Name, src.Type, src.Shape)
			}
			if ti.Offset%want != 0 {
				t.Errorf("alignment %d: tensor %s at %d", align, ti.Name, ti.Offset)
			}
			n, _ := src.Type.Size(src.Shape)
			if !bytes.Equal(b[ti.Offset:ti.Offset+n], src.Data.(raw)) {
				t.Errorf("alignment %d: tensor %s's bytes differ", align, ti.Name)
			}
		}
	}
}

// A large file goes through an *os.File, its tensors in parallel.
func TestWriteManyTensorsToFile(t *testing.T) {
	var ts []Tensor
	for i := range 50 {
		ts = append(ts, Tensor{Name: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Type: TensorF16,
			Shape: []uint64{uint64(i + 1), 3}, Data: raw(bytes.Repeat([]byte{byte(i)}, 6*(i+1)))})
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := Write(fh, []KV{{"general.architecture", "x"}}, ts); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f := read(t, b)
	for i, ti := range f.Tensors {
		data := b[ti.Offset : ti.Offset+uint64(6*(i+1))]
		if !bytes.Equal(data, ts[i].Data.(raw)) {
			t.Fatalf("tensor %s differs", ti.Name)
		}
	}
}

// short writes fewer bytes than its tensor needs.
type failing struct{ err error }

func (f failing) WriteTo(w io.Writer) (int64, error) { return 0, f.err }

func TestWriteRejects(t *testing.T) {
	f32 := func(name string, n int) Tensor {
		return Tensor{Name: name, Type: TensorF32, Shape: []uint64{uint64(n)}, Data: raw(make([]byte, 4*n))}
	}
	boom := errors.New("boom")
	tests := []struct {
		name    string
		meta    []KV
		tensors []Tensor
		want    string
	}{
		{"Go int", []KV{{"n", 3}}, nil, "no fixed width"},
		{"array of Go int", []KV{{"n", []int{3}}}, nil, "no fixed width"},
		{"nil value", []KV{{"n", nil}}, nil, "nil value"},
		{"map", []KV{{"n", map[string]string{}}}, nil, "no GGUF type"},
		{"empty key", []KV{{"", uint32(1)}}, nil, "empty"},
		{"duplicate key", []KV{{"k", uint32(1)}, {"k", uint32(2)}}, nil, "appears twice"},
		{"alignment not a power of two", []KV{{"general.alignment", uint32(24)}}, nil, "power of two"},
		{"alignment of the wrong type", []KV{{"general.alignment", uint64(32)}}, nil, "power of two"},
		{"duplicate tensor", nil, []Tensor{f32("w", 1), f32("w", 1)}, "appears twice"},
		{"long name", nil, []Tensor{f32(strings.Repeat("n", 64), 1)}, "want 1 to 63 bytes"},
		{"no data", nil, []Tensor{{Name: "w", Type: TensorF32, Shape: []uint64{1}}}, "no data"},
		{"row not whole blocks", nil, []Tensor{{Name: "w", Type: TensorQ4_0, Shape: []uint64{48}, Data: raw(nil)}}, "do not fill Q4_0 blocks"},
		{"five dimensions", nil, []Tensor{{Name: "w", Type: TensorF32, Shape: []uint64{1, 1, 1, 1, 1}, Data: raw(make([]byte, 4))}}, "1 to 4 dimensions"},
		{"unknown type", nil, []Tensor{{Name: "w", Type: 99, Shape: []uint64{1}, Data: raw(nil)}}, "not one this package knows"},
		{"short data", nil, []Tensor{{Name: "w", Type: TensorF32, Shape: []uint64{2}, Data: raw(make([]byte, 4))}}, "wrote 4 bytes, want 8"},
		{"failing data", nil, []Tensor{f32("a", 1), {Name: "w", Type: TensorF32, Shape: []uint64{2}, Data: failing{boom}}}, "tensor w: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(&buffer{}, tt.meta, tt.tensors)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestReadRejects(t *testing.T) {
	good := write(t, []KV{{"general.architecture", "x"}, {"a", []string{"p", "q"}}},
		[]Tensor{{Name: "w", Type: TensorF32, Shape: []uint64{4}, Data: raw(make([]byte, 16))}})
	le := binary.LittleEndian
	patch := func(at int, v uint64) []byte {
		b := bytes.Clone(good)
		le.PutUint64(b[at:], v)
		return b
	}
	// The key "a" starts after the header (24 bytes) and the first entry
	// (8+20 key, 4 type, 8+1 value): its array count is after 8+1 key,
	// 4 type, 4 element type.
	arrayCount := 24 + 8 + 20 + 4 + 9 + 9 + 4 + 4
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"not GGUF", []byte("this is not a model at all"), "not a GGUF file"},
		{"empty", nil, "not a GGUF file"},
		{"truncated header", good[:40], "runs past the end"},
		{"truncated data", good[:len(good)-20], "runs past the end of the file"},
		{"huge tensor count", patch(8, 1<<40), "runs past the end"},
		{"huge array", patch(arrayCount, 1<<50), "runs past the end"},
		{"version 1", append([]byte("GGUF\x01\x00\x00\x00"), good[8:]...), "GGUF version 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tt.b), int64(len(tt.b)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
	if f := read(t, good); !reflect.DeepEqual(f.Value("a"), []string{"p", "q"}) {
		t.Fatalf("the unpatched file reads back a = %v", f.Value("a"))
	}
}

func TestTensorSize(t *testing.T) {
	for _, c := range []struct {
		typ   TensorType
		shape []uint64
		want  uint64
	}{
		{TensorF32, []uint64{3, 2}, 24},
		{TensorF16, []uint64{4096, 128256}, 2 * 4096 * 128256},
		{TensorBF16, []uint64{7}, 14},
		{TensorQ4_0, []uint64{64, 2}, 4 * 18},
		{TensorQ8_0, []uint64{32, 1, 3}, 3 * 34},
		{TensorQ4_K, []uint64{512}, 2 * 144},
		{TensorQ6_K, []uint64{256, 2}, 2 * 210},
	} {
		if got, err := c.typ.Size(c.shape); err != nil || got != c.want {
			t.Errorf("%s %v: %d bytes (%v), want %d", c.typ, c.shape, got, err, c.want)
		}
	}
}

// FuzzRead: no input makes Read panic or allocate past what the file can
// hold, and what it accepts has consistent tensors.
func FuzzRead(f *testing.F) {
	var w buffer
	if err := Write(&w, []KV{{"general.architecture", "x"}, {"a", []string{"p", "q"}}, {"n", [][]uint8{{1}, {}}}},
		[]Tensor{{Name: "w", Type: TensorQ4_0, Shape: []uint64{32, 2}, Data: raw(make([]byte, 36))}}); err != nil {
		f.Fatal(err)
	}
	f.Add(w.b)
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		for _, ti := range file.Tensors {
			if ti.Offset < file.DataOffset || ti.Offset%file.Alignment != 0 {
				t.Fatalf("tensor %s at %d, data from %d, alignment %d", ti.Name, ti.Offset, file.DataOffset, file.Alignment)
			}
		}
	})
}

// TestWriteFile: a written file holds what Write writes, readable by
// others, and nothing else is left in its folder; a write that fails
// leaves the file that was there before, and no part of its own.
func TestWriteFile(t *testing.T) {
	tensors := []Tensor{{Name: "w", Type: TensorF32, Shape: []uint64{2}, Data: raw(make([]byte, 8))}}
	good := []KV{{"general.architecture", "x"}}
	for _, tc := range []struct {
		name    string
		meta    []KV
		wantErr string
	}{
		{name: "written", meta: good},
		{name: "refused", meta: []KV{{"k", uint32(1)}, {"k", uint32(2)}}, wantErr: "appears twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "models")
			path := filepath.Join(dir, "m.gguf")
			before := []byte("the model that was there")
			if tc.wantErr != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, before, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := WriteFile(path, tc.meta, tensors)
			got, rerr := os.ReadFile(path)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error %v, want one naming %s with %q", err, path, tc.wantErr)
				}
				if !bytes.Equal(got, before) {
					t.Fatalf("the file holds %q after a failed write, want what was there", got)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if want := write(t, tc.meta, tensors); !bytes.Equal(got, want) {
					t.Fatalf("the file holds %d bytes that differ from Write's %d", len(got), len(want))
				}
				fi, err := os.Stat(path)
				if err != nil || fi.Mode().Perm() != 0o644 {
					t.Fatalf("the file's mode is %v (%v), want 0644", fi.Mode(), err)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil || len(entries) != 1 {
				t.Fatalf("the folder holds %v (%v), want only m.gguf", entries, err)
			}
		})
	}
}
