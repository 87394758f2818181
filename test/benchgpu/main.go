// Command benchgpu measures genq's text throughput on a GPU through HTTP →
// NATS → worker, and writes it into docs/benchmarks-gpu.md. `make bench-gpu`
// drives it (scripts/bench-gpu.sh); it has two halves, because the machine
// with the GPU need not have Go:
//
//	benchgpu sweep  --url URL --model FILE --levels 1,4,16,64 --tokens 256 --out results.json
//	benchgpu report --in DIR --doc docs/benchmarks-gpu.md
//	benchgpu image  --dir MODEL_DIR --size 1024 --steps 28 --images 3 --out image.json
//
// sweep runs a closed loop at each concurrency, samples nvidia-smi while it
// runs, and reads the weight bytes one token reads from the model file;
// report turns one or more results files into the page's measured section;
// image times the ggml image engine in process (seconds per image and per
// step, GPU memory and busy fraction) on a model written by `genqctl models
// tiny --variant C --engine ggml --size medium`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchgpu:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: benchgpu sweep|report|image [flags]")
	}
	switch args[0] {
	case "sweep":
		fs := flag.NewFlagSet("sweep", flag.ContinueOnError)
		var o sweepOptions
		levels := fs.String("levels", "1,4,16,64", "concurrency levels, comma-separated")
		fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "the api")
		fs.StringVar(&o.model, "model", "", "the .gguf the worker serves, for its weight bytes")
		fs.StringVar(&o.label, "label", "", "the model's name in the report (default: the file's)")
		fs.IntVar(&o.tokens, "tokens", 256, "tokens per answer: the worker must run with TEXT_IGNORE_EOS and TEXT_MAX_NEW_TOKENS set to it")
		fs.IntVar(&o.rounds, "rounds", 3, "requests per level, in multiples of the concurrency")
		fs.Float64Var(&o.copyGBps, "copy-gbps", 0, "measured device-to-device copy bandwidth, GB/s (0: no bound)")
		fs.StringVar(&o.out, "out", "results.json", "where to write the results")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		for _, s := range strings.Split(*levels, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("levels: %q is not a concurrency", s)
			}
			o.levels = append(o.levels, n)
		}
		res, err := sweep(ctx, o, stdout)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.out, b, 0o644)
	case "report":
		fs := flag.NewFlagSet("report", flag.ContinueOnError)
		in := fs.String("in", "", "a directory of results files (*.json)")
		doc := fs.String("doc", "docs/benchmarks-gpu.md", "the page whose measured section is rewritten")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return report(*in, *doc, stdout)
	case "image":
		fs := flag.NewFlagSet("image", flag.ContinueOnError)
		var o imageOptions
		fs.StringVar(&o.dir, "dir", "", "the model directory (ggml/*.gguf beside the tokenizers)")
		fs.IntVar(&o.size, "size", 1024, "image width and height")
		fs.IntVar(&o.steps, "steps", 28, "denoising steps")
		fs.IntVar(&o.images, "images", 3, "images timed, after one warm-up image")
		fs.BoolVar(&o.noT5, "no-t5", false, "run without T5 (IMAGE_T5=off)")
		fs.StringVar(&o.device, "device", "cuda", "auto, cpu or cuda")
		fs.StringVar(&o.label, "label", "SD3-medium shapes fp16", "the model's name in the results")
		fs.StringVar(&o.out, "out", "image.json", "where to write the results")
		fs.BoolVar(&o.f16Matrices, "f16-matrices", false, "keep the transformer's matrices in float16 where the GPU would take them as bfloat16 (ggmlimage.Config.BFloat16 off)")
		fs.BoolVar(&o.freshGraphs, "fresh-graphs", false, "build the transformer's graph anew at every step (ggmlimage.Config.FreshStepGraphs)")
		fs.IntVar(&o.groups, "attention-groups", 0, "runs each head's queries are split into on CUDA (tensor.Options.AttentionGroups); 0, the default")
		fs.StringVar(&o.png, "png", "", "write the first timed image here, to compare runs")
		fs.BoolVar(&o.profile, "profile", false, "after the timed images, time one more operation by operation (slower; the shares are what count)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if o.dir == "" || o.images < 1 || o.steps < 1 {
			return errors.New("image: --dir is required, --images and --steps at least 1")
		}
		res, err := imageBench(ctx, o, stdout)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s, %dx%d, %d steps, T5 %v: %.2f s/image, %.3f s/step, GPU busy %.0f%%, GPU memory %.0f MiB\n",
			res.GPU, res.Size, res.Size, res.Steps, res.T5, res.SecondsPerImage, res.SecondsPerStep, res.GPUUtilPct, res.GPUMemMiB)
		if len(res.Profile) > 0 {
			fmt.Fprintf(stdout, "profile of one image, operation by operation: %.2f s in all\n", res.ProfiledSeconds)
			for i, op := range res.Profile {
				if i == 40 {
					break
				}
				fmt.Fprintf(stdout, "%6.2f%% %9.1f ms %6d× %s\n", 100*op.Time.Seconds()/res.ProfiledSeconds, float64(op.Time.Microseconds())/1000, op.Calls, op.Op)
			}
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(o.out, b, 0o644)
	}
	return fmt.Errorf("unknown subcommand %q: want sweep, report or image", args[0])
}
