package half

import (
	"math"
	"testing"
)

func TestFromFloat32KnownBits(t *testing.T) {
	// Bit patterns from the IEEE 754 binary16 definition.
	tests := []struct {
		f    float32
		bits uint16
	}{
		{0, 0x0000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},                 // largest finite half
		{65520, 0x7c00},                 // rounds up to +Inf
		{float32(math.Inf(-1)), 0xfc00}, // -Inf
		{6.103515625e-05, 0x0400},       // smallest normal, 2^-14
		{5.960464477539063e-08, 0x0001}, // smallest subnormal, 2^-24
		{1 + 1.0/2048, 0x3c00},          // halfway between 1 and next: ties to even (down)
		{1 + 3.0/2048, 0x3c02},          // halfway, odd below: ties to even (up)
		{0.1, 0x2e66},
	}
	for _, tt := range tests {
		if got := FromFloat32(tt.f); got != tt.bits {
			t.Errorf("FromFloat32(%v) = %#04x, want %#04x", tt.f, got, tt.bits)
		}
	}
}

func TestRoundTripEveryHalf(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		f := ToFloat32(uint16(h))
		if f != f { // NaN payloads need not survive
			continue
		}
		if got := FromFloat32(f); got != uint16(h) {
			t.Fatalf("round trip of %#04x via %v gave %#04x", h, f, got)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	in := []float32{0.25, -3, 1024}
	out := Decode(Encode(in))
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("value %d: got %v, want %v", i, out[i], in[i])
		}
	}
}
