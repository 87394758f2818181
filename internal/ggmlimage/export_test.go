package ggmlimage

// OpenTransformerBFloat16 is OpenTransformer with its matrices kept as
// bfloat16, as on a GPU that multiplies them faster so: the CPU's ggml
// multiplies bfloat16 too, so tests check the arithmetic here.
func OpenTransformerBFloat16(path string, threads int) (*Transformer, error) {
	return openTransformer(path, placement{threads: threads, bfloat16: true})
}
