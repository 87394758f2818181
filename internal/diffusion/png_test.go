package diffusion

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/png"
	"math/rand/v2"
	"testing"
)

// testImage is an opaque image of smooth gradients and noise, as decoded
// latents look; alpha below 255 somewhere when transparent.
func testImage(w, h int, transparent bool) *image.NRGBA {
	rng := rand.New(rand.NewPCG(uint64(w), uint64(h)))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			o := img.PixOffset(x, y)
			img.Pix[o] = byte(x + rng.IntN(8))
			img.Pix[o+1] = byte(y*3 + rng.IntN(4))
			img.Pix[o+2] = byte(x ^ y)
			img.Pix[o+3] = 255
		}
	}
	if transparent {
		img.Pix[len(img.Pix)-1] = 7
	}
	return img
}

// TestStripedPNG: every split of the rows decodes to the same pixels, the
// smallest and oddest shapes too, and an image with transparency keeps it.
func TestStripedPNG(t *testing.T) {
	for _, c := range []struct {
		w, h, stripes int
		transparent   bool
	}{
		{1, 1, 1, false}, {1, 1, 4, false}, {3, 1000, 7, false}, {1000, 3, 2, false},
		{257, 129, 2, false}, {64, 64, 100, false}, {300, 200, 16, false}, {33, 17, 3, true},
	} {
		img := testImage(c.w, c.h, c.transparent)
		var buf bytes.Buffer
		if err := encodePNGStripes(&buf, img, c.stripes); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		got, err := png.Decode(&buf)
		if err != nil {
			t.Fatalf("%+v: decode: %v", c, err)
		}
		for y := range c.h {
			for x := range c.w {
				if g, want := color(got, x, y), img.NRGBAAt(x, y); g != [4]byte{want.R, want.G, want.B, want.A} {
					t.Fatalf("%+v: pixel (%d,%d) is %v, want %v", c, x, y, g, want)
				}
			}
		}
	}
}

func color(m image.Image, x, y int) [4]byte {
	switch m := m.(type) {
	case *image.RGBA:
		c := m.RGBAAt(x, y)
		return [4]byte{c.R, c.G, c.B, c.A}
	case *image.NRGBA:
		c := m.NRGBAAt(x, y)
		return [4]byte{c.R, c.G, c.B, c.A}
	}
	r, g, b, a := m.At(x, y).RGBA()
	return [4]byte{byte(r >> 8), byte(g >> 8), byte(b >> 8), byte(a >> 8)}
}

// TestOneStripeIsPNGEncode: in one stripe the compressed rows are
// png.Encode's, byte for byte: the same filters, chosen the same way, at
// the same level. More stripes cost little in size.
func TestOneStripeIsPNGEncode(t *testing.T) {
	img := testImage(300, 200, false)
	var ours, std bytes.Buffer
	if err := encodePNGStripes(&ours, img, 1); err != nil {
		t.Fatal(err)
	}
	if err := png.Encode(&std, img); err != nil {
		t.Fatal(err)
	}
	if a, b := idat(t, ours.Bytes()), idat(t, std.Bytes()); !bytes.Equal(a, b) {
		t.Fatalf("image data differ: %d bytes against png.Encode's %d", len(a), len(b))
	}
	var striped bytes.Buffer
	if err := encodePNGStripes(&striped, img, 4); err != nil {
		t.Fatal(err)
	}
	if s, o := striped.Len(), ours.Len(); float64(s) > 1.05*float64(o) {
		t.Errorf("4 stripes take %d bytes, 1 takes %d: over 5%% more", s, o)
	}
}

// idat is a PNG's IDAT chunks' data, joined.
func idat(t *testing.T, b []byte) []byte {
	t.Helper()
	var out []byte
	for b = b[8:]; len(b) >= 12; {
		n := int(binary.BigEndian.Uint32(b))
		if string(b[4:8]) == "IDAT" {
			out = append(out, b[8:8+n]...)
		}
		b = b[12+n:]
	}
	return out
}

// BenchmarkPNG: a 1024² image, as variant C makes, by png.Encode and in
// stripes on every CPU.
func BenchmarkPNG(b *testing.B) {
	img := testImage(1024, 1024, false)
	for _, c := range []struct {
		name   string
		encode func(*bytes.Buffer) error
	}{
		{"png.Encode", func(w *bytes.Buffer) error { return png.Encode(w, img) }},
		{"striped", func(w *bytes.Buffer) error { return encodePNG(w, img) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var buf bytes.Buffer
			for b.Loop() {
				buf.Reset()
				if err := c.encode(&buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "bytes")
		})
	}
}
