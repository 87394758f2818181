package tinygguf

import (
	"encoding/binary"
	"math"

	"github.com/x448/float16"
)

// q4BlockSize is the number of weights one Q4_0 block holds.
const q4BlockSize = 32

// appendQ4_0 appends rows of float32 weights in ggml's Q4_0 layout: per block
// of 32, an fp16 scale d then 16 bytes of 4-bit codes, weight ≈ d·(q−8).
// Byte j holds code j in its low nibble and code j+16 in its high one. The
// scale is chosen as ggml's reference quantizer does: the weight of largest
// magnitude maps to code 0 exactly (d = max/−8), so its sign is kept.
func appendQ4_0(out []byte, x []float32) []byte {
	if len(x)%q4BlockSize != 0 {
		panic("appendQ4_0: length is not a multiple of 32")
	}
	for b := 0; b < len(x); b += q4BlockSize {
		blk := x[b : b+q4BlockSize]
		var amax, maxv float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, maxv = a, v
			}
		}
		d := maxv / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(d).Bits())
		for j := range q4BlockSize / 2 {
			lo := min(15, int8(blk[j]*id+8.5))
			hi := min(15, int8(blk[j+q4BlockSize/2]*id+8.5))
			out = append(out, byte(lo)|byte(hi)<<4)
		}
	}
	return out
}

// dequantizeQ4_0 is the inverse, for tests.
func dequantizeQ4_0(b []byte) []float32 {
	const blockBytes = 2 + q4BlockSize/2
	out := make([]float32, 0, len(b)/blockBytes*q4BlockSize)
	for off := 0; off+blockBytes <= len(b); off += blockBytes {
		d := float16.Frombits(binary.LittleEndian.Uint16(b[off:])).Float32()
		var blk [q4BlockSize]float32
		for j := range q4BlockSize / 2 {
			q := b[off+2+j]
			blk[j] = d * float32(int(q&0x0f)-8)
			blk[j+q4BlockSize/2] = d * float32(int(q>>4)-8)
		}
		out = append(out, blk[:]...)
	}
	return out
}
