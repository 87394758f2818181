package ggmlimage

// OpenTransformerBFloat16 is OpenTransformer with its matrices kept as
// bfloat16, as on a GPU that multiplies them faster so: the CPU's ggml
// multiplies bfloat16 too, so tests check the arithmetic here.
func OpenTransformerBFloat16(path string, threads int) (*Transformer, error) {
	return openTransformer(path, placement{threads: threads, bfloat16: true})
}

// OpenTransformerBLAS is OpenTransformer on a CPU backend whose matrix
// products go through ggml's BLAS backend or not (tensor.Options.BLAS),
// and the backend's description of them.
func OpenTransformerBLAS(path string, threads int, blas string) (*Transformer, string, error) {
	m, err := openTransformer(path, placement{threads: threads, blas: blas})
	if err != nil {
		return nil, "", err
	}
	return m, m.part.be.Device().BLAS, nil
}

// OpenVAEDecoderBFloat16 is OpenVAEDecoder with its 3×3 kernels kept as
// bfloat16 (Config.BFloat16), as where the CPU multiplies them natively.
func OpenVAEDecoderBFloat16(path string, threads int) (*VAEDecoder, error) {
	return openVAEDecoder(path, placement{threads: threads, bfloat16: true})
}
