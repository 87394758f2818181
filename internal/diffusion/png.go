package diffusion

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"image"
	"image/png"
	"io"
	"runtime"
	"sync"
)

// encodePNG writes img as a PNG, as png.Encode does (8-bit RGB when every
// pixel is opaque, each row's filter chosen the same way, the default
// compression level), with its rows compressed in stripes at once on the
// CPUs: at 1024² png.Encode alone takes 100–170 ms, as long as a few
// diffusion steps on a GPU. Each stripe is a run of deflate blocks that
// ends byte-aligned (a sync flush) and refers to nothing before it, so
// their concatenation is one deflate stream any decoder reads, as pigz
// makes them. An image with transparency goes to png.Encode.
func encodePNG(w io.Writer, img *image.NRGBA) error {
	return encodePNGStripes(w, img, min(runtime.GOMAXPROCS(0), max(1, img.Bounds().Dy()/stripeRows)))
}

func encodePNGStripes(w io.Writer, img *image.NRGBA, stripes int) error {
	b := img.Bounds()
	width, height := b.Dx(), b.Dy()
	if !opaque(img) || width == 0 || height == 0 {
		return png.Encode(w, img)
	}
	per := (height + stripes - 1) / stripes
	type stripe struct {
		raw, packed bytes.Buffer // the filtered rows; their deflate blocks
		err         error
	}
	parts := make([]stripe, (height+per-1)/per)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &parts[i]
			from, to := i*per, min((i+1)*per, height)
			filterRows(&s.raw, img, from, to)
			zw, err := flate.NewWriter(&s.packed, flate.DefaultCompression)
			if err != nil {
				s.err = err
				return
			}
			if _, s.err = zw.Write(s.raw.Bytes()); s.err != nil {
				return
			}
			if i == len(parts)-1 {
				s.err = zw.Close() // the final block
			} else {
				s.err = zw.Flush() // byte-aligned, not final
			}
		}()
	}
	wg.Wait()
	sum := adler32.New()
	var data bytes.Buffer
	data.Write([]byte{0x78, 0x9c}) // zlib: deflate, 32 KiB window, default level
	for i := range parts {
		if parts[i].err != nil {
			return parts[i].err
		}
		sum.Write(parts[i].raw.Bytes())
		data.Write(parts[i].packed.Bytes())
	}
	data.Write(sum.Sum(nil))

	if _, err := io.WriteString(w, "\x89PNG\r\n\x1a\n"); err != nil {
		return err
	}
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(height))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits a sample, truecolour; compression, filter and interlace 0
	if err := writeChunk(w, "IHDR", ihdr[:]); err != nil {
		return err
	}
	for rest := data.Bytes(); len(rest) > 0; {
		n := min(len(rest), maxChunk)
		if err := writeChunk(w, "IDAT", rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return writeChunk(w, "IEND", nil)
}

const (
	// stripeRows is the fewest rows a stripe is worth: fewer, and the
	// blocks each stripe starts afresh cost more than the time saved.
	stripeRows = 64
	// maxChunk is the most data one IDAT chunk carries: PNG allows 2³¹−1,
	// and a reader that holds a whole chunk holds at most this.
	maxChunk = 1 << 20
)

func opaque(img *image.NRGBA) bool {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		row := img.Pix[img.PixOffset(b.Min.X, y) : img.PixOffset(b.Max.X-1, y)+4]
		for i := 3; i < len(row); i += 4 {
			if row[i] != 0xff {
				return false
			}
		}
	}
	return true
}

func writeChunk(w io.Writer, kind string, data []byte) error {
	var head [8]byte
	binary.BigEndian.PutUint32(head[:4], uint32(len(data)))
	copy(head[4:], kind)
	crc := crc32.NewIEEE()
	crc.Write(head[4:])
	crc.Write(data)
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc.Sum32())
	for _, p := range [][]byte{head[:], data, tail[:]} {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// filterRows appends rows from to to of img, as RGB, each after the
// filter byte PNG's heuristic picks for it: of None, Sub, Up, Average and
// Paeth, the one whose bytes, read as signed, sum smallest in magnitude,
// as png.Encode does.
func filterRows(out *bytes.Buffer, img *image.NRGBA, from, to int) {
	b := img.Bounds()
	n := 3 * b.Dx()
	prev, cur := make([]byte, n), make([]byte, n)
	var cand [5][]byte
	for f := range cand {
		cand[f] = make([]byte, n)
	}
	rgb := func(dst []byte, y int) {
		src := img.Pix[img.PixOffset(b.Min.X, b.Min.Y+y):]
		for x := range b.Dx() {
			copy(dst[3*x:3*x+3], src[4*x:4*x+3])
		}
	}
	if from > 0 {
		rgb(prev, from-1)
	} else {
		clear(prev)
	}
	for y := from; y < to; y++ {
		rgb(cur, y)
		f := bestFilter(cur, prev, &cand)
		out.WriteByte(byte(f))
		out.Write(cand[f])
		prev, cur = cur, prev
	}
}

// bestFilter fills cand with cur under each of the five filters (prev is
// the row above, zeros for the first) and returns the one to use.
func bestFilter(cur, prev []byte, cand *[5][]byte) int {
	const bpp = 3
	copy(cand[0], cur)
	for i := range cur {
		var left, upLeft byte
		if i >= bpp {
			left, upLeft = cur[i-bpp], prev[i-bpp]
		}
		up := prev[i]
		cand[1][i] = cur[i] - left
		cand[2][i] = cur[i] - up
		cand[3][i] = cur[i] - byte((int(left)+int(up))/2)
		cand[4][i] = cur[i] - paeth(left, up, upLeft)
	}
	best, bestSum := -1, 0
	for _, f := range []int{2, 4, 0, 1, 3} { // png.Encode's order: the first of equal sums wins
		if s := absSum(cand[f]); best < 0 || s < bestSum {
			best, bestSum = f, s
		}
	}
	return best
}

func absSum(row []byte) int {
	s := 0
	for _, c := range row {
		s += abs8(c)
	}
	return s
}

func abs8(c byte) int {
	if c < 128 {
		return int(c)
	}
	return 256 - int(c)
}

func paeth(a, b, c byte) byte {
	p := int(a) + int(b) - int(c)
	pa, pb, pc := abs(p-int(a)), abs(p-int(b)), abs(p-int(c))
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
