// Package half converts between float32 and IEEE 754 half precision
// (float16), the dtype of fp16 ONNX exports. ONNX Runtime's Go binding has no
// float16 type, so fp16 tensors travel as their raw little-endian bits.
package half

import (
	"encoding/binary"
	"math"
)

// FromFloat32 rounds f to the nearest float16, ties to even, the way
// numpy's astype(float16) does; values too large become ±Inf.
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff

	switch {
	case exp == 0xff: // Inf or NaN
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp-127 > 15: // overflow
		return sign | 0x7c00
	case exp-127 >= -14: // normal half
		e := uint32(exp-127+15) << 10
		m := mant >> 13
		h := e | m
		// Round to nearest even on the 13 dropped bits; a carry out of the
		// mantissa correctly bumps the exponent (and can make Inf).
		rest := mant & 0x1fff
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	case exp-127 >= -25: // subnormal half
		m := mant | 0x800000 // implicit leading 1
		shift := uint32(-(exp - 127) - 14 + 13)
		h := m >> shift
		rest := m & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rest > halfway || (rest == halfway && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	default: // underflow to zero
		return sign
	}
}

// ToFloat32 widens a float16 exactly.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default: // subnormal: normalise it
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
}

// Encode writes fs as little-endian float16 bytes.
func Encode(fs []float32) []byte {
	out := make([]byte, 2*len(fs))
	for i, f := range fs {
		binary.LittleEndian.PutUint16(out[2*i:], FromFloat32(f))
	}
	return out
}

// Decode reads little-endian float16 bytes.
func Decode(b []byte) []float32 {
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = ToFloat32(binary.LittleEndian.Uint16(b[2*i:]))
	}
	return out
}
