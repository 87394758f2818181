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

// q8BlockSize is the number of weights one Q8_0 block holds.
const q8BlockSize = 32

// appendQ8_0 appends weights in ggml's Q8_0 layout: per block of 32, an
// fp16 scale d then 32 signed bytes, weight ≈ d·q, d = max|x|/127.
func appendQ8_0(out []byte, x []float32) []byte {
	if len(x)%q8BlockSize != 0 {
		panic("appendQ8_0: length is not a multiple of 32")
	}
	for b := 0; b < len(x); b += q8BlockSize {
		blk := x[b : b+q8BlockSize]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(d).Bits())
		for _, v := range blk {
			out = append(out, byte(int8(math.Round(float64(v*id)))))
		}
	}
	return out
}

// qkK is the number of weights one K-quant super-block holds.
const qkK = 256

// appendQ4_K appends weights in ggml's Q4_K layout: per super-block of 256,
// fp16 d and dmin, twelve bytes of eight 6-bit scales and mins, then 128
// bytes of 4-bit codes; weight ≈ d·sc·q − dmin·m over each 32 of them.
// The scales are the plain min/max fit, not ggml's searched one: a random
// model needs the layout, not the last bit of accuracy.
func appendQ4_K(out []byte, x []float32) []byte {
	if len(x)%qkK != 0 {
		panic("appendQ4_K: length is not a multiple of 256")
	}
	for b := 0; b < len(x); b += qkK {
		blk := x[b : b+qkK]
		var scale, minus [8]float32
		var maxScale, maxMin float32
		for j := range 8 {
			lo, hi := float32(0), blk[32*j]
			for _, v := range blk[32*j : 32*j+32] {
				lo, hi = min(lo, v), max(hi, v)
			}
			scale[j], minus[j] = (hi-lo)/15, -lo
			maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, minus[j])
		}
		d, dmin := maxScale/63, maxMin/63
		// The codes are fitted to the scales as stored: fp16 d and dmin
		// times 6-bit integers.
		d16, dmin16 := float16.Fromfloat32(d), float16.Fromfloat32(dmin)
		d, dmin = d16.Float32(), dmin16.Float32()
		var ls, lm [8]uint8
		for j := range 8 {
			if d > 0 {
				ls[j] = uint8(min(63, math.Round(float64(scale[j]/d))))
			}
			if dmin > 0 {
				lm[j] = uint8(min(63, math.Round(float64(minus[j]/dmin))))
			}
		}
		var sc [12]uint8
		for j := range 8 {
			if j < 4 {
				sc[j], sc[j+4] = ls[j], lm[j]
			} else {
				sc[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
				sc[j-4] |= (ls[j] >> 4) << 6
				sc[j] |= (lm[j] >> 4) << 6
			}
		}
		var q [qkK]uint8
		for j := range 8 {
			step, off := d*float32(ls[j]), dmin*float32(lm[j])
			for i, v := range blk[32*j : 32*j+32] {
				if step > 0 {
					q[32*j+i] = uint8(max(0, min(15, math.Round(float64((v+off)/step)))))
				}
			}
		}
		out = binary.LittleEndian.AppendUint16(out, d16.Bits())
		out = binary.LittleEndian.AppendUint16(out, dmin16.Bits())
		out = append(out, sc[:]...)
		for c := 0; c < qkK; c += 64 {
			for l := range 32 {
				out = append(out, q[c+l]|q[c+l+32]<<4)
			}
		}
	}
	return out
}

// appendQ6_K appends weights in ggml's Q6_K layout: per super-block of 256,
// 128 bytes of the codes' low four bits, 64 of their high two, sixteen
// signed 8-bit scales (one per 16 weights) and an fp16 d; weight ≈
// d·sc·(q−32).
func appendQ6_K(out []byte, x []float32) []byte {
	if len(x)%qkK != 0 {
		panic("appendQ6_K: length is not a multiple of 256")
	}
	for b := 0; b < len(x); b += qkK {
		blk := x[b : b+qkK]
		var scale [16]float32
		var maxScale float32
		for j := range 16 {
			var amax float32
			for _, v := range blk[16*j : 16*j+16] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			scale[j] = amax / 31
			maxScale = max(maxScale, scale[j])
		}
		d16 := float16.Fromfloat32(maxScale / 127)
		d := d16.Float32()
		var sc [16]int8
		var q [qkK]uint8
		for j := range 16 {
			if d > 0 {
				sc[j] = int8(min(127, math.Round(float64(scale[j]/d))))
			}
			step := d * float32(sc[j])
			for i, v := range blk[16*j : 16*j+16] {
				c := 32.0
				if step > 0 {
					c = max(0, min(63, math.Round(float64(v/step))+32))
				}
				q[16*j+i] = uint8(c)
			}
		}
		var ql [128]uint8
		var qh [64]uint8
		for c := 0; c < qkK; c += 128 {
			l0, h0 := c/2, c/4
			for l := range 32 {
				q1, q2, q3, q4 := q[c+l], q[c+l+32], q[c+l+64], q[c+l+96]
				ql[l0+l] = q1&0xf | (q3&0xf)<<4
				ql[l0+l+32] = q2&0xf | (q4&0xf)<<4
				qh[h0+l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
		out = append(out, ql[:]...)
		out = append(out, qh[:]...)
		for _, s := range sc {
			out = append(out, byte(s))
		}
		out = binary.LittleEndian.AppendUint16(out, d16.Bits())
	}
	return out
}
