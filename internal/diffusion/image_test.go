package diffusion

import (
	"bytes"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"testing"

	"github.com/genq/genq/internal/genq"
)

func TestApplyGuidance(t *testing.T) {
	tests := []struct {
		uncond, cond, scale, want float64
	}{
		{0, 1, 7, 7},         // u + 7(c-u)
		{1, 1, 7, 1},         // no difference: guidance changes nothing
		{2, 1, 7, -5},        // 2 + 7(1-2)
		{0.5, -0.5, 1, -0.5}, // scale 1 is the conditional prediction
		{0.5, -0.5, 0, 0.5},  // scale 0 is the unconditional one
	}
	for _, tt := range tests {
		out := make([]float32, 1)
		Guidance(out, []float32{float32(tt.uncond)}, []float32{float32(tt.cond)}, tt.scale)
		if math.Abs(float64(out[0])-tt.want) > 1e-6 {
			t.Errorf("guidance(u=%v, c=%v, s=%v) = %v, want %v", tt.uncond, tt.cond, tt.scale, out[0], tt.want)
		}
	}
}

func TestUnscaleLatents(t *testing.T) {
	// SD3: x/1.5305 + 0.0609.
	got := Unscale([]float32{0, 1.5305, -3.061}, 1.5305, 0.0609)
	want := []float64{0.0609, 1.0609, -1.9391}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6 {
			t.Errorf("unscale[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestToPixel(t *testing.T) {
	tests := []struct {
		v    float32
		want uint8
	}{
		{-1, 0}, {1, 255}, {0, 128}, // 127.5 rounds half away from zero
		{-5, 0}, {5, 255}, // clamped
		{0.5, 191}, // 0.75·255 = 191.25
		{-0.5, 64}, // 0.25·255 = 63.75
	}
	for _, tt := range tests {
		if got := toPixel(tt.v); got != tt.want {
			t.Errorf("toPixel(%v) = %d, want %d", tt.v, got, tt.want)
		}
	}
}

func TestEncodePNGPlanesToPixels(t *testing.T) {
	// A 2x1 image, planar [1,3,1,2]: R = (-1, 1), G = (1, -1), B = (0, 0).
	sample := []float32{-1, 1, 1, -1, 0, 0}
	data, err := EncodePNG(sample, []int64{1, 3, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	want := [][3]uint32{{0, 255, 128}, {255, 0, 128}}
	for x, w := range want {
		r, g, b, a := img.At(x, 0).RGBA()
		if got := [3]uint32{r >> 8, g >> 8, b >> 8}; got != w || a != 0xffff {
			t.Errorf("pixel %d = %v alpha %d, want %v opaque", x, got, a, w)
		}
	}
	if _, err := EncodePNG(sample, []int64{1, 4, 1, 2}); err == nil {
		t.Error("a 4-channel output should be refused")
	}
}

// TestEncodeJPEG: a JPEG's quality sets its size, and it keeps the picture
// (a flat colour survives within JPEG's rounding).
func TestEncodeJPEG(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = uint8(i/4%64*4), 100, uint8(i/256), 255
	}
	best, contentType, err := Encode(img, genq.ImageJPEG, 0)
	if err != nil || contentType != "image/jpeg" {
		t.Fatalf("%q, %v", contentType, err)
	}
	small, _, err := Encode(img, genq.ImageJPEG, 5)
	if err != nil || len(small) >= len(best) {
		t.Fatalf("quality 5: %d bytes against %d at the default, %v", len(small), len(best), err)
	}
	got, err := jpeg.Decode(bytes.NewReader(best))
	if err != nil {
		t.Fatal(err)
	}
	if _, g, _, _ := got.At(10, 10).RGBA(); g>>8 < 97 || g>>8 > 103 {
		t.Fatalf("green %d, want about 100", g>>8)
	}
}

func TestInitialLatents(t *testing.T) {
	a, b, c := InitialLatents(9, 4096), InitialLatents(9, 4096), InitialLatents(10, 4096)
	if !equalFloats(a, b) {
		t.Error("the same seed drew different noise")
	}
	if equalFloats(a, c) {
		t.Error("different seeds drew the same noise")
	}
	var sum, sq float64
	for _, x := range a {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	mean, variance := sum/4096, sq/4096-(sum/4096)*(sum/4096)
	if math.Abs(mean) > 0.1 || math.Abs(variance-1) > 0.1 {
		t.Errorf("noise mean %.3f variance %.3f, want about 0 and 1", mean, variance)
	}
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
