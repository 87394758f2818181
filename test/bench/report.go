package main

import (
	"fmt"
	"image/color"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/procfs"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// writeChart draws throughput against concurrency for each model, and the
// latency percentiles of each, side by side.
func writeChart(path string, points []textPoint) error {
	byModel := map[string][]textPoint{}
	var models []string
	for _, p := range points {
		if _, ok := byModel[p.model]; !ok {
			models = append(models, p.model)
		}
		byModel[p.model] = append(byModel[p.model], p)
	}
	colors := []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255}}

	tput := logLogPlot("Text throughput through HTTP → NATS → worker", "tokens/s (log scale)")
	lat := logLogPlot("Request latency (p50 solid, p99 dashed)", "seconds (log scale)")
	concTicks := plot.ConstantTicks{}
	maxRate, maxLat := 0.0, 0.0
	for _, p := range points {
		maxRate, maxLat = max(maxRate, p.tokPerS), max(maxLat, p.p99.Seconds())
		if !slices.ContainsFunc(concTicks, func(t plot.Tick) bool { return t.Value == float64(p.conc) }) {
			concTicks = append(concTicks, plot.Tick{Value: float64(p.conc), Label: strconv.Itoa(p.conc)})
		}
	}
	for _, pl := range []*plot.Plot{tput, lat} {
		pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, concTicks
		pl.Add(plotter.NewGrid())
	}
	// Head room above the highest line keeps the legend off the data.
	tput.Y.Max, lat.Y.Max = maxRate*6, maxLat*6
	for i, m := range models {
		var xy, p50, p99 plotter.XYs
		for _, p := range byModel[m] {
			xy = append(xy, plotter.XY{X: float64(p.conc), Y: p.tokPerS})
			p50 = append(p50, plotter.XY{X: float64(p.conc), Y: p.p50.Seconds()})
			p99 = append(p99, plotter.XY{X: float64(p.conc), Y: p.p99.Seconds()})
		}
		c := colors[i%len(colors)]
		if err := addLine(tput, xy, c, nil, m+" model"); err != nil {
			return err
		}
		if err := addLine(lat, p50, c, nil, m+" p50"); err != nil {
			return err
		}
		if err := addLine(lat, p99, c, []vg.Length{vg.Points(4), vg.Points(3)}, m+" p99"); err != nil {
			return err
		}
	}
	const w, h = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadY: vg.Inch / 8, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{{tput, lat}}, tiles, dc)
	tput.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	return saveImage(img, path)
}

// logLogPlot is a plot against concurrency with log scales on both axes and
// the legend at the top.
func logLogPlot(title, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "concurrent requests (log scale)"
	p.Y.Label.Text = yLabel
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	return p
}

func addLine(p *plot.Plot, xy plotter.XYs, c color.Color, dashes []vg.Length, name string) error {
	l, pts, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	l.Color, l.Dashes, pts.Color = c, dashes, c
	p.Add(l, pts)
	p.Legend.Add(name, l)
	return nil
}

func saveImage(img *vgimg.Canvas, path string) error {
	png := vgimg.PngCanvas{Canvas: img}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := png.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// markdown is the measured section of docs/benchmarks.md.
func (b *bench) markdown(took time.Duration, chart string) string {
	r := b.result
	var s strings.Builder
	fmt.Fprintf(&s, "## Measured by `make bench`\n\nCommit `%s`, %s, on %d cores of %s (load average at the end: %s). %d runs per figure, medians quoted; the runs of one throughput point disagreed by %s (max−min over median, median over all points). Everything runs on this one machine: the load generator, the api, NATS and the worker share its cores.\n\n",
		commit(b.root), time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), procfs.CPUName(), loadAverage(), b.runs, fmtPct(median(r.noise)))
	fmt.Fprintf(&s, "![throughput and latency against concurrency](%s)\n\n", chart)

	o := r.overhead
	fmt.Fprintf(&s, "### Façade overhead\n\nThe same prompts on the same tiny model (8 new tokens, one request at a time, %d requests each way, interleaved in 5 rounds), once through `POST /generate` (api → NATS → worker → back, three processes) and once straight into the text backend in process.\n\n", o.n)
	s.WriteString("| | direct | through HTTP and NATS | added | ratio |\n|---|---|---|---|---|\n")
	fmt.Fprintf(&s, "| p50 | %s | %s | **%s** | %.2f× |\n", ms(o.directP50), ms(o.httpP50), ms(o.httpP50-o.directP50), ratio(o.httpP50, o.directP50))
	fmt.Fprintf(&s, "| p99 | %s | %s | **%s** | %.2f× |\n\n", ms(o.direct99), ms(o.httpP99), ms(o.httpP99-o.direct99), ratio(o.httpP99, o.direct99))

	s.WriteString("### Text throughput against concurrency\n\nThrough HTTP, `SLOTS=16`, stop tokens ignored so every answer has exactly the configured length (as llama.cpp's batched bench counts). Tokens/s is all answers' tokens over the wall time of the batch.\n\n")
	s.WriteString("| model | new tokens per request | concurrency | tokens/s | p50 latency | p99 latency | vs. concurrency 1 |\n|---|---|---|---|---|---|---|\n")
	base := map[string]float64{}
	for _, p := range r.text {
		if p.conc == 1 {
			base[p.model] = p.tokPerS
		}
		fmt.Fprintf(&s, "| %s | %d | %d | %.0f | %s | %s | %.2f× |\n", p.model, r.tokens[p.model], p.conc, p.tokPerS, ms(p.p50), ms(p.p99), p.tokPerS/base[p.model])
	}
	s.WriteString("\n| model | time to first token (one-token answer, c=1) | per-token latency (c=1) |\n|---|---|---|\n")
	for _, m := range sortedKeys(r.ttft) {
		fmt.Fprintf(&s, "| %s | %s | %s |\n", m, ms(r.ttft[m]), ms(r.perToken[m]))
	}
	s.WriteString("\n**Against the engine alone**, at concurrency 1 with the same model and settings: a plain loop over the engine (one sequence, whole-prompt prefill, one forward step per token, the same graph and sampler: `textgen.Backend.GenerateUnbatched`), genq's scheduler in process (shared system prefix, continuous batching), and genq through HTTP, NATS and the worker. Ratios are to the plain loop; on this shared machine, differences within the run-to-run spread quoted at the top are noise.\n\n")
	s.WriteString("| model | plain loop (tok/s) | scheduler in process | ratio | genq through HTTP | ratio |\n|---|---|---|---|---|---|\n")
	for _, m := range sortedKeys(r.plain) {
		fmt.Fprintf(&s, "| %s | %.0f | %.0f | %.2f× | %.0f | %.2f× |\n", m, r.plain[m], r.inProcess[m], r.inProcess[m]/r.plain[m], base[m], base[m]/r.plain[m])
	}
	s.WriteString("\nThe mid model has about 100M parameters (BF16, variant B's format, as its hub model's file); the tiny one about 0.1M. The bar on this CPU is llama.cpp's own batched benchmark on a 126M-parameter F32 llama with 2 threads: 89, 163, 227 and 323 tok/s at 1, 2, 4 and 8 sequences.")
	var vsBar []string
	for _, p := range r.text {
		if bar, ok := llamaCppBar[p.conc]; ok && p.model == "mid" {
			vsBar = append(vsBar, fmt.Sprintf("%.2f× at %d", p.tokPerS/bar, p.conc))
		}
	}
	if len(vsBar) > 0 {
		fmt.Fprintf(&s, " The mid model through HTTP, NATS and the worker, against that bar: %s.", strings.Join(vsBar, ", "))
	}
	s.WriteString("\n\n")

	if d, h := r.hostStep["device"], r.hostStep["host"]; d.Steps > 0 && h.Steps > 0 {
		s.WriteString("### Host time per decode step\n\n64 sequences over Llama 3's 128,256-token vocabulary (the tiny blocks with the full vocabulary, so the engine's own time stays short), means over the decode-only steps. The host's work is planning (filling the batch) and finishing (sampling, decoding); on a GPU it is what keeps the card waiting. Rows narrowed on the device (`TEXT_DEVICE_SAMPLING=on`, llama.cpp's backend sampling) hand the sampler 50 candidates each; rows read whole are sampled from 128,256 logits on the host.\n\n")
		s.WriteString("| rows narrowed | host per step | plan | finish | engine compute (excluded) | decode steps |\n|---|---|---|---|---|---|\n")
		for _, k := range []string{"device", "host"} {
			t := r.hostStep[k]
			fmt.Fprintf(&s, "| %s | **%s** | %s | %s | %s | %d |\n", k, ms(t.Host()), ms(t.Plan), ms(t.Finish), ms(t.Compute), t.Steps)
		}
		s.WriteString("\nThe top-k of a 128k row is slow on a CPU, which is why the compute column is larger when narrowing there; a GPU does it in microseconds, and `TEXT_DEVICE_SAMPLING=auto` narrows only on a GPU.\n\n")
	}

	im := r.image
	fmt.Fprintf(&s, "### Images\n\nVariant C on the default engine (ggml) and the tiny model at %d×%d through HTTP, 28 steps: **%s per image**, %s per step (from the difference with a 2-step run).\n\n", im.size, im.size, ms(im.perImage), ms(im.perStep))

	s.WriteString("### Cold start\n\nFrom starting the api and a worker (nats-server already up) to the first `POST /generate` answered 200; the request waits in the queue while the worker loads its model. Tiny generated models, so this is genq's own start-up, not a model's load time.\n\n| variant | cold start |\n|---|---|\n")
	for _, v := range sortedKeys(r.coldStarts) {
		fmt.Fprintf(&s, "| %s | %s |\n", v, ms(r.coldStarts[v]))
	}
	s.WriteString("\n### Memory\n\nPeak resident set (VmHWM) of each process.\n\n| process | peak RSS |\n|---|---|\n")
	for _, row := range r.rss {
		fmt.Fprintf(&s, "| %s | %.0f MiB |\n", row.what, row.mib)
	}
	fmt.Fprintf(&s, "\n`make bench` took %s.\n", took.Round(time.Second))
	return s.String()
}

// llamaCppBar is llama.cpp's batched-bench tok/s by sequences on this CPU
// (docs/benchmarks.md, "The bar").
var llamaCppBar = map[int]float64{1: 89, 2: 163, 4: 227, 8: 323}

func ms(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000)
	}
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func fmtPct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
