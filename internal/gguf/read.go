package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// File is a GGUF file's header: its metadata and its tensors' descriptions.
type File struct {
	Version   uint32
	Meta      []KV
	Tensors   []TensorInfo
	Alignment uint64
	// DataOffset is where the data section starts in the file.
	DataOffset uint64
}

// TensorInfo describes a tensor in a file.
type TensorInfo struct {
	Name  string
	Type  TensorType
	Shape []uint64
	// Offset is where the tensor's data starts in the file (not in the data
	// section, as the file stores it).
	Offset uint64
}

// Value returns the value of key, or nil if the file has none.
func (f *File) Value(key string) any {
	for _, kv := range f.Meta {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// Tensor returns the description of the tensor called name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return TensorInfo{}, false
}

// Read reads the header of the GGUF file r of size bytes. Every length in it
// is checked against the bytes left, so a damaged file gives an error, not a
// huge allocation. Values come back as the Go types Write takes: scalars as
// themselves, arrays as typed slices ([]string, []int32, ...), arrays of
// arrays as []any.
func Read(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("read gguf: size %d", size)
	}
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: uint64(size), left: uint64(size)}
	f, err := d.file()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("the file ends inside its header")
		}
		return nil, fmt.Errorf("read gguf: %w", err)
	}
	return f, nil
}

type decoder struct {
	r    *bufio.Reader
	size uint64 // the file's
	left uint64 // bytes not yet read
	buf  [8]byte
}

func (d *decoder) bytes(n uint64) ([]byte, error) {
	if n > d.left {
		return nil, fmt.Errorf("a length of %d bytes runs past the end of the file", n)
	}
	var b []byte
	if n <= uint64(len(d.buf)) {
		b = d.buf[:n]
	} else {
		b = make([]byte, n)
	}
	if _, err := io.ReadFull(d.r, b); err != nil {
		return nil, err
	}
	d.left -= n
	return b, nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	b, err := d.bytes(n)
	return string(b), err
}

// count reads an array length or a count of entries, each at least min
// bytes, and checks the file can hold that many.
func (d *decoder) count(min uint64) (uint64, error) {
	n, err := d.u64()
	if err != nil {
		return 0, err
	}
	if n > d.left/min {
		return 0, fmt.Errorf("a count of %d runs past the end of the file", n)
	}
	return n, nil
}

func (d *decoder) file() (*File, error) {
	magic, err := d.bytes(4)
	if err != nil {
		return nil, fmt.Errorf("not a GGUF file: %w", err)
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("not a GGUF file (it starts %q)", magic)
	}
	f := &File{Alignment: DefaultAlignment}
	if f.Version, err = d.u32(); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != Version {
		return nil, fmt.Errorf("GGUF version %d: want 2 or 3", f.Version)
	}
	// A tensor description takes at least 24 bytes, a metadata entry 12.
	nt, err := d.count(24)
	if err != nil {
		return nil, err
	}
	nkv, err := d.count(12)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, nkv)
	for range nkv {
		key, err := d.str()
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, fmt.Errorf("metadata key %s appears twice", key)
		}
		seen[key] = true
		t, err := d.u32()
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(t))
		if err != nil {
			return nil, fmt.Errorf("metadata %s: %w", key, err)
		}
		f.Meta = append(f.Meta, KV{Key: key, Value: v})
		if key == "general.alignment" {
			a, ok := v.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, fmt.Errorf("general.alignment is %v (%T), want a power of two as a uint32", v, v)
			}
			f.Alignment = uint64(a)
		}
	}
	for range nt {
		var t TensorInfo
		if t.Name, err = d.str(); err != nil {
			return nil, err
		}
		dims, err := d.u32()
		if err != nil {
			return nil, err
		}
		if dims == 0 || dims > maxDims {
			return nil, fmt.Errorf("tensor %s has %d dimensions, want 1 to %d", t.Name, dims, maxDims)
		}
		for range dims {
			n, err := d.u64()
			if err != nil {
				return nil, err
			}
			t.Shape = append(t.Shape, n)
		}
		kind, err := d.u32()
		if err != nil {
			return nil, err
		}
		t.Type = TensorType(kind)
		if t.Offset, err = d.u64(); err != nil {
			return nil, err
		}
		f.Tensors = append(f.Tensors, t)
	}
	headerEnd := d.size - d.left
	f.DataOffset = pad(headerEnd, f.Alignment)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return nil, fmt.Errorf("tensor %s at offset %d is not aligned to %d", t.Name, t.Offset, f.Alignment)
		}
		t.Offset += f.DataOffset
		if n, err := t.Type.Size(t.Shape); err == nil && t.Offset+n > d.size {
			return nil, fmt.Errorf("tensor %s (%d bytes at %d) runs past the end of the file (%d bytes)", t.Name, n, t.Offset, d.size)
		}
	}
	return f, nil
}

func (d *decoder) value(t ValueType) (any, error) {
	if t == TypeArray {
		et, err := d.u32()
		if err != nil {
			return nil, err
		}
		return d.array(ValueType(et))
	}
	return d.scalar(t)
}

func (d *decoder) scalar(t ValueType) (any, error) {
	if t == TypeString {
		return d.str()
	}
	n := t.size()
	if n == 0 {
		return nil, fmt.Errorf("value type %d is not one GGUF defines", uint32(t))
	}
	b, err := d.bytes(uint64(n))
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return le.Uint16(b), nil
	case TypeInt16:
		return int16(le.Uint16(b)), nil
	case TypeUint32:
		return le.Uint32(b), nil
	case TypeInt32:
		return int32(le.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, fmt.Errorf("a bool of value %d", b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return le.Uint64(b), nil
	case TypeInt64:
		return int64(le.Uint64(b)), nil
	default: // TypeFloat64
		return math.Float64frombits(le.Uint64(b)), nil
	}
}

// array reads an array's length and elements of type t.
func (d *decoder) array(t ValueType) (any, error) {
	elemMin := uint64(t.size())
	if elemMin == 0 {
		elemMin = 8 // a string or an array: at least its length
	}
	n, err := d.count(elemMin)
	if err != nil {
		return nil, err
	}
	switch t {
	case TypeString:
		return collect[string](d, n, t)
	case TypeUint8:
		return collect[uint8](d, n, t)
	case TypeInt8:
		return collect[int8](d, n, t)
	case TypeUint16:
		return collect[uint16](d, n, t)
	case TypeInt16:
		return collect[int16](d, n, t)
	case TypeUint32:
		return collect[uint32](d, n, t)
	case TypeInt32:
		return collect[int32](d, n, t)
	case TypeFloat32:
		return collect[float32](d, n, t)
	case TypeBool:
		return collect[bool](d, n, t)
	case TypeUint64:
		return collect[uint64](d, n, t)
	case TypeInt64:
		return collect[int64](d, n, t)
	case TypeFloat64:
		return collect[float64](d, n, t)
	case TypeArray:
		out := make([]any, 0, n)
		for range n {
			v, err := d.value(TypeArray)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("array of value type %d, which GGUF does not define", uint32(t))
}

func collect[T any](d *decoder, n uint64, t ValueType) ([]T, error) {
	out := make([]T, 0, n)
	for range n {
		v, err := d.scalar(t)
		if err != nil {
			return nil, err
		}
		out = append(out, v.(T))
	}
	return out, nil
}
