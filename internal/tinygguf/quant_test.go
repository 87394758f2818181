package tinygguf

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// The dequantizers below follow ggml's dequantize_row_* for each layout,
// so a code packed into the wrong nibble or bit pair shows as a weight far
// from the one written.

func dequantizeQ8_0(b []byte) []float32 {
	var out []float32
	for off := 0; off+34 <= len(b); off += 34 {
		d := float16.Frombits(binary.LittleEndian.Uint16(b[off:])).Float32()
		for _, q := range b[off+2 : off+34] {
			out = append(out, d*float32(int8(q)))
		}
	}
	return out
}

func dequantizeQ4_K(b []byte) []float32 {
	var out []float32
	for off := 0; off+144 <= len(b); off += 144 {
		d := float16.Frombits(binary.LittleEndian.Uint16(b[off:])).Float32()
		dmin := float16.Frombits(binary.LittleEndian.Uint16(b[off+2:])).Float32()
		sc, qs := b[off+4:off+16], b[off+16:off+144]
		scaleMin := func(j int) (float32, float32) {
			if j < 4 {
				return float32(sc[j] & 63), float32(sc[j+4] & 63)
			}
			return float32(sc[j+4]&0xf | (sc[j-4]>>6)<<4), float32(sc[j+4]>>4 | (sc[j]>>6)<<4)
		}
		for c := range 4 {
			s1, m1 := scaleMin(2 * c)
			s2, m2 := scaleMin(2*c + 1)
			q := qs[32*c : 32*c+32]
			for l := range 32 {
				out = append(out, d*s1*float32(q[l]&0xf)-dmin*m1)
			}
			for l := range 32 {
				out = append(out, d*s2*float32(q[l]>>4)-dmin*m2)
			}
		}
	}
	return out
}

func dequantizeQ6_K(b []byte) []float32 {
	var out []float32
	for off := 0; off+210 <= len(b); off += 210 {
		ql, qh, sc := b[off:off+128], b[off+128:off+192], b[off+192:off+208]
		d := float16.Frombits(binary.LittleEndian.Uint16(b[off+208:])).Float32()
		var y [256]float32
		for n := 0; n < 256; n += 128 {
			l0, h0 := n/2, n/4
			for l := range 32 {
				is := n/16 + l/16
				q1 := int(ql[l0+l]&0xf|(qh[h0+l]>>0&3)<<4) - 32
				q2 := int(ql[l0+l+32]&0xf|(qh[h0+l]>>2&3)<<4) - 32
				q3 := int(ql[l0+l]>>4|(qh[h0+l]>>4&3)<<4) - 32
				q4 := int(ql[l0+l+32]>>4|(qh[h0+l]>>6&3)<<4) - 32
				y[n+l] = d * float32(int8(sc[is])) * float32(q1)
				y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
		out = append(out, y[:]...)
	}
	return out
}

// TestQuantizers: each layout read back as ggml reads it gives every weight
// within its type's step of the one written.
func TestQuantizers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 4*qkK)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	x[5] = 0 // a zero, and a block of zeros: no division by a zero scale
	for i := qkK; i < qkK+32; i++ {
		x[i] = 0
	}
	for _, tt := range []struct {
		name  string
		pack  func([]byte, []float32) []byte
		read  func([]byte) []float32
		bytes int
		// tol is the largest error allowed, relative to the weights'
		// largest magnitude: half a step of the type's codes, and the
		// rounding of its fp16 and 6-bit scales.
		tol float64
	}{
		{"Q8_0", appendQ8_0, dequantizeQ8_0, len(x) / 32 * 34, 0.5 / 127 * 1.01},
		{"Q4_K", appendQ4_K, dequantizeQ4_K, len(x) / 256 * 144, 0.08},
		{"Q6_K", appendQ6_K, dequantizeQ6_K, len(x) / 256 * 210, 0.025},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.pack(nil, x)
			if len(b) != tt.bytes {
				t.Fatalf("%d bytes, want %d", len(b), tt.bytes)
			}
			y := tt.read(b)
			if len(y) != len(x) {
				t.Fatalf("read back %d weights, want %d", len(y), len(x))
			}
			var amax, worst float64
			for _, v := range x {
				amax = max(amax, math.Abs(float64(v)))
			}
			for i := range x {
				worst = max(worst, math.Abs(float64(y[i]-x[i])))
			}
			if worst/amax > tt.tol {
				t.Errorf("largest error %.4f of the weights' %.3f (%.3f), want at most %.3f", worst, amax, worst/amax, tt.tol)
			}
			for i := qkK; i < qkK+32; i++ {
				if y[i] != 0 && tt.name != "Q4_K" {
					t.Fatalf("weight %d of a zero block reads %g", i, y[i])
				}
			}
		})
	}
}
