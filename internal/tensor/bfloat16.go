package tensor

import (
	"math"
	"runtime"
	"sync"

	"github.com/x448/float16"
)

// float16ToBFloat16 converts IEEE half-precision values to bfloat16 in
// place, each rounded to the nearest (ties to even), as ggml's own
// conversion from float32 does. Every float16 is a float32 exactly, so
// this is that conversion after an exact one. Weights run to gigabytes:
// the work is split over the CPUs.
func float16ToBFloat16(v []uint16) {
	table := bfloat16Table()
	const chunk = 1 << 20
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for start := 0; start < len(v); start += chunk {
		part := v[start:min(start+chunk, len(v))]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for i, h := range part {
				part[i] = table[h]
			}
		}()
	}
	wg.Wait()
}

// bfloat16Table maps each of the 65,536 float16 values to its bfloat16.
var bfloat16Table = sync.OnceValue(func() *[1 << 16]uint16 {
	var t [1 << 16]uint16
	for h := range t {
		t[h] = bfloat16(float16.Frombits(uint16(h)).Float32())
	}
	return &t
})

// bfloat16 rounds f to bfloat16's 8 bits of mantissa, to the nearest
// with ties to even; a NaN stays a (quiet) NaN.
func bfloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if f != f {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
