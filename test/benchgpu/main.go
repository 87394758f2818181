// Command benchgpu measures genq's text throughput on a GPU through HTTP →
// NATS → worker, and writes it into docs/benchmarks-gpu.md. `make bench-gpu`
// drives it (scripts/bench-gpu.sh); it has two halves, because the machine
// with the GPU need not have Go:
//
//	benchgpu sweep  --url URL --model FILE --levels 1,4,16,64 --tokens 256 --out results.json
//	benchgpu report --in DIR --doc docs/benchmarks-gpu.md
//
// sweep runs a closed loop at each concurrency, samples nvidia-smi while it
// runs, and reads the weight bytes one token reads from the model file;
// report turns one or more results files into the page's measured section.
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
		return errors.New("usage: benchgpu sweep|report [flags]")
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
	}
	return fmt.Errorf("unknown subcommand %q: want sweep or report", args[0])
}
