package ggmlimage

import (
	"sync"

	"github.com/genq/genq/internal/tensor"
)

// OpenTransformerBFloat16 is OpenTransformer with its matrices kept as
// bfloat16, as on a GPU that multiplies them faster so: the CPU's ggml
// multiplies bfloat16 too, so tests check the arithmetic here.
func OpenTransformerBFloat16(path string, threads int) (*Transformer, error) {
	return openTransformer(path, placement{threads: threads, bfloat16: true})
}

// OpenVAEDecoderForCUDA is OpenVAEDecoder on a CPU backend that writes
// its graphs as for CUDA (tensor.Options.GraphsFor): channels-first, on
// ggml's direct convolution and GroupNorm, which the CPU computes too.
func OpenVAEDecoderForCUDA(path string, threads int) (*VAEDecoder, func(), error) {
	be, err := tensor.Open(tensor.Options{Device: tensor.DeviceCPU, Threads: threads, GraphsFor: tensor.DeviceCUDA})
	if err != nil {
		return nil, nil, err
	}
	d, err := openVAEDecoder(path, placement{be: be, mu: new(sync.Mutex)})
	if err != nil {
		be.Close()
		return nil, nil, err
	}
	return d, func() { d.Close(); be.Close() }, nil
}
