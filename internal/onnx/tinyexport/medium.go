package tinyexport

import (
	"fmt"
	"path/filepath"

	"github.com/genq/genq/internal/sd3"
)

// WriteMediumGGML writes a model in SD3-medium's shapes for the ggml engine
// alone, with random weights (drawn a tensor at a time; its size is in
// docs/image.md, "What fits where"):
// the GGUF files of every part, and the tiny export's tokenizers, scheduler
// and configs beside them. Its ONNX graphs are the tiny stand-ins, which
// the ONNX engine cannot run with it. GPU benchmarks use it.
func WriteMediumGGML(dir string, seed int64, dtype sd3.DType) error {
	if err := Write(dir, seed); err != nil {
		return err
	}
	mmdit, vae, clipL, clipG, t5 := sd3.MediumMMDiT(), sd3.MediumVAE(), sd3.ClipL(), sd3.ClipG(), sd3.T5XXL()
	parts := []struct {
		file, arch string
		meta       map[string]any
		specs      []sd3.Spec
		src        sd3.Source
	}{
		{sd3.VAEDecoderFile, sd3.ArchVAE, vae.VAEMetadata(), vae.VAEDecoderTensors(), sd3.RandomSource{Specs: vae.VAEDecoderTensors(), Seed: seed}},
		{sd3.TransformerFile, sd3.ArchMMDiT, mmdit.MMDiTMetadata(), mmdit.MMDiTTensors(), mmdit.RandomMMDiTSource(seed)},
		{sd3.ClipLFile, sd3.ArchCLIP, clipL.CLIPMetadata(), clipL.CLIPTensors(), sd3.RandomSource{Specs: clipL.CLIPTensors(), Seed: seed}},
		{sd3.ClipGFile, sd3.ArchCLIP, clipG.CLIPMetadata(), clipG.CLIPTensors(), sd3.RandomSource{Specs: clipG.CLIPTensors(), Seed: seed + 1}},
		{sd3.T5File, sd3.ArchT5, t5.T5Metadata(), t5.T5Tensors(), sd3.RandomSource{Specs: t5.T5Tensors(), Seed: seed}},
	}
	for _, p := range parts {
		if err := sd3.WriteGGUF(filepath.Join(dir, p.file), p.arch, p.meta, p.specs, p.src, dtype); err != nil {
			return fmt.Errorf("medium ggml model: %w", err)
		}
	}
	return nil
}
