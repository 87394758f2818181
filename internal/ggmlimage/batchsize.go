package ggmlimage

import (
	"os"
	"strconv"
	"strings"

	"github.com/genq/genq/internal/procfs"
	"github.com/genq/genq/internal/sd3"
	"github.com/genq/genq/internal/tensor"
)

// itemBytes estimates what one batch item adds to a transformer call on
// an image of width×height: the attention scores and their softmax over
// the joint sequence (image patches and text tokens), for every head at
// once as the graph computes them, and the activations a block keeps
// (the joint sequence at the transformer's width, about a dozen times).
func itemBytes(cfg sd3.MMDiTConfig, width, height int) int64 {
	patches := int64(width/8/cfg.PatchSize) * int64(height/8/cfg.PatchSize)
	n := patches + clipTokens + t5Tokens
	const f32 = 4
	scores := 2 * int64(cfg.Heads) * n * n * f32
	activations := 12 * n * int64(cfg.Width()) * f32
	return scores + activations
}

// memoryBatch is the most batch items a transformer call takes when free
// bytes are left beside the weights: as many as fit in most of them, for
// images of the largest size a job may ask, at least one image's two
// (negative prompt and prompt) and at most what the slots can bring.
func memoryBatch(cfg sd3.MMDiTConfig, maxSize, slots int, free int64) int {
	most := 2 * slots
	if free <= 0 {
		return most
	}
	fit := int(free * 3 / 4 / itemBytes(cfg, maxSize, maxSize))
	return max(2, min(most, fit-fit%2))
}

// freeBytes is what the device has left for computing once the weights
// are loaded: on a GPU, its free memory at the probe less the files placed
// on it; on the CPU, the memory the kernel says is available. Zero means
// unknown.
func freeBytes(dev tensor.Device, files []string) int64 {
	if dev.Kind == tensor.DeviceCPU {
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(procfs.Field("/proc/meminfo", "MemAvailable")), " kB"), 10, 64)
		return kb << 10
	}
	free := int64(dev.FreeBytes)
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			free -= fi.Size()
		}
	}
	return max(free, 0)
}
