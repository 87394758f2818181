package ggmlimage

import (
	"testing"

	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// The step batch is sized from the memory left beside the weights, for
// the largest image a job may ask: at least one image's two items, at
// most what the slots bring.
func TestMemoryBatch(t *testing.T) {
	medium := sd3.MediumMMDiT()
	const gib = 1 << 30
	perItem := itemBytes(medium, 1024, 1024)
	if perItem < 2*gib || perItem > 5*gib {
		t.Fatalf("one 1024² item of SD3-medium is estimated at %d bytes: its attention scores and their softmax alone are about 3.8 GB", perItem)
	}
	for _, tc := range []struct {
		name          string
		maxSize, slot int
		free          int64
		want          int
	}{
		{"an A10G without T5, about 17 GB left: one 1024² image a call", 1024, 8, 17 * gib, 2},
		{"an A100 of 40 GB without T5: three images a call", 1024, 8, 33 * gib, 6},
		{"little left: still one image", 1024, 8, 2 * gib, 2},
		{"plenty: the slots bound it", 1024, 2, 80 * gib, 4},
		{"small images fit more", 512, 8, 17 * gib, 16},
		{"unknown free memory: the slots", 1024, 3, 0, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryBatch(medium, tc.maxSize, tc.slot, tc.free); got != tc.want {
				t.Errorf("memoryBatch = %d, want %d (an item: %.2f GiB)", got, tc.want, float64(itemBytes(medium, tc.maxSize, tc.maxSize))/gib)
			}
		})
	}
	if free := freeBytes(tensor.Device{Kind: tensor.DeviceCPU}, nil); free <= 0 {
		t.Errorf("the CPU's available memory reads as %d", free)
	}
}
