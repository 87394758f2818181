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
// this is that conversion after an exact one.
func float16ToBFloat16(v []uint16) {
	table := bfloat16Table()
	inChunks(len(v), func(lo, hi int) {
		for i, h := range v[lo:hi] {
			v[lo+i] = table[h]
		}
	})
}

// float16ToFloat32 writes the IEEE half-precision values h to f, exactly.
func float16ToFloat32(f []float32, h []uint16) {
	inChunks(len(h), func(lo, hi int) {
		for i, x := range h[lo:hi] {
			f[lo+i] = float16.Frombits(x).Float32()
		}
	})
}

// inChunks calls work on [0, n) in chunks, as many at once as there are
// CPUs: weights run to gigabytes.
func inChunks(n int, work func(lo, hi int)) {
	const chunk = 1 << 20
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			work(lo, min(lo+chunk, n))
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
