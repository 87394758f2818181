// Package gguf reads and writes GGUF files (version 3), the format llama.cpp
// loads models from: a header, typed metadata, the tensors' descriptions,
// then their data, each tensor at an aligned offset.
//
// The layout follows llama.cpp's ggml/src/gguf.cpp and the gguf-py
// documentation: little-endian throughout, strings as a uint64 length and
// their bytes, tensor offsets relative to the start of the data section,
// which is itself aligned.
package gguf

import "fmt"

const (
	// Magic opens every GGUF file.
	Magic = "GGUF"
	// Version is the format version this package writes and reads.
	Version = 3
	// DefaultAlignment aligns tensor data when general.alignment is absent.
	DefaultAlignment = 32
	// maxNameLen is ggml's GGML_MAX_NAME: a tensor name must be shorter.
	maxNameLen = 64
	// maxDims is ggml's GGML_MAX_DIMS.
	maxDims = 4
)

// ValueType is the type of a metadata value, as the file stores it.
type ValueType uint32

const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the bytes a scalar of type t takes, or 0 for strings and arrays.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry. Value is a Go value of a sized type: uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64,
// float64, or a slice of one of them (an array), or a slice of slices (an
// array of arrays, which the format allows and llama.cpp refuses).
type KV struct {
	Key   string
	Value any
}

// TensorType is ggml's type of a tensor's elements.
type TensorType uint32

const (
	TensorF32  TensorType = 0
	TensorF16  TensorType = 1
	TensorQ4_0 TensorType = 2
	TensorQ4_1 TensorType = 3
	TensorQ5_0 TensorType = 6
	TensorQ5_1 TensorType = 7
	TensorQ8_0 TensorType = 8
	TensorQ8_1 TensorType = 9
	TensorQ2_K TensorType = 10
	TensorQ3_K TensorType = 11
	TensorQ4_K TensorType = 12
	TensorQ5_K TensorType = 13
	TensorQ6_K TensorType = 14
	TensorQ8_K TensorType = 15
	TensorI8   TensorType = 24
	TensorI16  TensorType = 25
	TensorI32  TensorType = 26
	TensorI64  TensorType = 27
	TensorF64  TensorType = 28
	TensorBF16 TensorType = 30
)

// tensorLayout is a type's block: how many elements and how many bytes.
type tensorLayout struct {
	name          string
	elems, nbytes uint64
}

var tensorLayouts = map[TensorType]tensorLayout{
	TensorF32:  {"F32", 1, 4},
	TensorF16:  {"F16", 1, 2},
	TensorQ4_0: {"Q4_0", 32, 18},
	TensorQ4_1: {"Q4_1", 32, 20},
	TensorQ5_0: {"Q5_0", 32, 22},
	TensorQ5_1: {"Q5_1", 32, 24},
	TensorQ8_0: {"Q8_0", 32, 34},
	TensorQ8_1: {"Q8_1", 32, 36},
	TensorQ2_K: {"Q2_K", 256, 84},
	TensorQ3_K: {"Q3_K", 256, 110},
	TensorQ4_K: {"Q4_K", 256, 144},
	TensorQ5_K: {"Q5_K", 256, 176},
	TensorQ6_K: {"Q6_K", 256, 210},
	TensorQ8_K: {"Q8_K", 256, 292},
	TensorI8:   {"I8", 1, 1},
	TensorI16:  {"I16", 1, 2},
	TensorI32:  {"I32", 1, 4},
	TensorI64:  {"I64", 1, 8},
	TensorF64:  {"F64", 1, 8},
	TensorBF16: {"BF16", 1, 2},
}

func (t TensorType) String() string {
	if l, ok := tensorLayouts[t]; ok {
		return l.name
	}
	return fmt.Sprintf("TensorType(%d)", uint32(t))
}

// Size is the bytes a tensor of type t and shape takes, or an error if the
// type is one this package does not know or the rows do not fill whole
// blocks.
func (t TensorType) Size(shape []uint64) (uint64, error) {
	l, ok := tensorLayouts[t]
	if !ok {
		return 0, fmt.Errorf("tensor type %d is not one this package knows", uint32(t))
	}
	if len(shape) == 0 || len(shape) > maxDims {
		return 0, fmt.Errorf("shape %v: want 1 to %d dimensions", shape, maxDims)
	}
	if shape[0]%l.elems != 0 {
		return 0, fmt.Errorf("shape %v: rows of %d elements do not fill %s blocks of %d", shape, shape[0], l.name, l.elems)
	}
	n := shape[0] / l.elems * l.nbytes
	for _, d := range shape[1:] {
		if d != 0 && n > (1<<63)/d {
			return 0, fmt.Errorf("shape %v: too large", shape)
		}
		n *= d
	}
	return n, nil
}

// pad rounds n up to a multiple of align, a power of two.
func pad(n, align uint64) uint64 {
	return (n + align - 1) &^ (align - 1)
}
