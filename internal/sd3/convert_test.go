package sd3

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/genq/genq/internal/gguf"
)

func TestConvertDiffusers(t *testing.T) {
	dir := t.TempDir()
	if err := WriteTinyDiffusers(dir, nil); err != nil {
		t.Fatal(err)
	}
	var parts []string
	if err := ConvertDiffusers(dir, F16, true, func(p string) { parts = append(parts, p) }); err != nil {
		t.Fatal(err)
	}
	if len(parts) != 5 {
		t.Errorf("converted %v", parts)
	}
	for _, tc := range []struct {
		file   string
		specs  []Spec
		tensor string
		want   Weights
	}{
		{VAEDecoderFile, TinyVAE().VAEDecoderTensors(), "decoder.conv_in.weight", RandomWeights(TinyVAE().VAEDecoderTensors(), 1)},
		{T5File, TinyT5(120, 24).T5Tensors(), "shared.weight", RandomWeights(TinyT5(120, 24).T5Tensors(), 5)},
		{ClipGFile, TinyCLIP(300, 12, false).CLIPTensors(), "text_projection.weight", RandomWeights(TinyCLIP(300, 12, false).CLIPTensors(), 4)},
	} {
		path := filepath.Join(dir, tc.file)
		meta, err := ReadHeader(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckShapes(tc.file, meta.Tensors, tc.specs); err != nil {
			t.Error(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, tt := range meta.Tensors {
			if tt.Name != tc.tensor {
				continue
			}
			if tt.Type != gguf.TensorF16 {
				t.Errorf("%s: type %s, want f16", tt.Name, tt.Type)
			}
			size, _ := tt.Type.Size(tt.Shape)
			raw := make([]byte, size)
			if _, err := f.ReadAt(raw, int64(tt.Offset)); err != nil {
				t.Fatal(err)
			}
			want := tc.want[tc.tensor].Data
			for i := range want {
				if got := float16.Frombits(binary.LittleEndian.Uint16(raw[2*i:])).Float32(); got != want[i] {
					t.Fatalf("%s[%d] = %v, want %v", tc.tensor, i, got, want[i])
				}
			}
		}
		f.Close()
	}
}

func TestConvertDiffusersRefusesAMisshapenTensor(t *testing.T) {
	dir := t.TempDir()
	const name = "transformer_blocks.1.attn.to_q.weight"
	err := WriteTinyDiffusers(dir, func(part string, w Weights) {
		if part == "transformer" {
			w[name] = Tensor{Shape: []int{16, 8}, Data: make([]float32, 128)}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	err = ConvertDiffusers(dir, F16, false, nil)
	if err == nil || !strings.Contains(err.Error(), name) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want one line naming %s, got %v", name, err)
	}
}
