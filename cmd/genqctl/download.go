package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/sd3"
)

// downloadConfig is what the flags and the environment say.
type downloadConfig struct{ ctlconfig.Download }

// runDownload handles "genqctl download": a snapshot of a hub repository
// into the model directory; Dockerfile.worker runs it at build time.
func runDownload(ctx context.Context, args []string, e env) error {
	cfg, err := parseDownloadFlags(args, e)
	if err != nil {
		return err
	}
	if cfg.ModelsFile != "" {
		return downloadCatalog(ctx, cfg, e)
	}
	opts, err := cfg.options(e)
	if err != nil {
		return err
	}
	client, err := cfg.client(e)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "downloading %s@%s from %s into %s (include %s, exclude %s)\n",
		opts.Repo, opts.Revision, client.Endpoint(), opts.Dir, patternList(opts.Include), patternList(opts.Exclude))
	opts.Reporter = cfg.reporter(e)
	res, err := client.Download(ctx, opts)
	printSummary(e.stdout, opts, res)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("interrupted: what was fetched is kept; run the same command again to resume: %w", err)
	}
	if err != nil || cfg.Engine != "ggml" {
		return err
	}
	return convertForGGML(opts.Dir, e)
}

// convertForGGML writes the ggml engine's GGUF files from the downloaded
// diffusers checkpoint, once: files already there are kept.
func convertForGGML(dir string, e env) error {
	if _, err := os.Stat(filepath.Join(dir, sd3.T5File)); err == nil {
		fmt.Fprintf(e.stdout, "%s already holds the ggml files; delete %s to convert again\n", dir, filepath.Join(dir, "ggml"))
		return nil
	}
	start := time.Now()
	err := sd3.ConvertDiffusers(dir, sd3.F16, true, func(part string) {
		fmt.Fprintf(e.stdout, "converting %s to GGUF (fp16)\n", part)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s in %s\n", filepath.Join(dir, "ggml"), time.Since(start).Round(time.Second))
	return nil
}

func parseDownloadFlags(args []string, e env) (*downloadConfig, error) {
	fs := envflag.New("genqctl download", e.getenv, e.stderr)
	cfg := &downloadConfig{}
	cfg.Register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if cfg.Variant == "" && cfg.ModelsFile == "" {
		return nil, usageError{"usage: genqctl download --variant A|B|C [--repo ID] [--revision REV] [--dir DIR] [--include GLOB]… [--exclude GLOB]…"}
	}
	if cfg.Parallel < 1 || cfg.Retries < 1 {
		return nil, usageError{"--parallel and --retries must be at least 1"}
	}
	if cfg.Engine != "onnx" && cfg.Engine != "ggml" {
		return nil, usageError{fmt.Sprintf("--engine %q: want onnx or ggml", cfg.Engine)}
	}
	if !slices.Contains([]string{"auto", "bar", "lines", "none"}, cfg.Progress) {
		return nil, usageError{fmt.Sprintf("--progress %q: want auto, bar, lines or none", cfg.Progress)}
	}
	return cfg, nil
}

// options applies the variant's defaults to what the user did not set.
func (cfg *downloadConfig) options(e env) (hub.Options, error) {
	v, err := genq.ParseVariant(cfg.Variant)
	if err != nil {
		return hub.Options{}, usageError{err.Error()}
	}
	preset, _ := hub.VariantPreset(v)
	switch {
	case v.Kind() != genq.OutputImage:
		cfg.Engine = "" // variant C's choice: the text variants always run on ggml
	case cfg.Engine == "ggml":
		preset = v.Spec().HubGGML
	}
	opts := hub.Options{
		Repo:         cfg.Repo,
		Revision:     cfg.Revision,
		Dir:          cfg.Dir,
		Include:      cfg.Include,
		Parallel:     cfg.Parallel,
		StallTimeout: cfg.StallTimeout,
	}
	// The preset's patterns name the preset's files: another repository's
	// files would not match them, so with --repo everything is selected.
	if opts.Repo == "" || opts.Repo == preset.Repo {
		opts.Repo = preset.Repo
		if len(opts.Include) == 0 {
			opts.Include = preset.Include
		}
	}
	if !cfg.NoDefaultExcludes {
		opts.Exclude = hub.DefaultExcludes()
	}
	for _, p := range cfg.Exclude {
		if !slices.Contains(opts.Exclude, p) {
			opts.Exclude = append(opts.Exclude, p)
		}
	}
	if opts.Dir == "" {
		opts.Dir = genq.DefaultModelDir(v, cfg.InContainer)
	}
	return opts, nil
}

func (cfg *downloadConfig) client(e env) (*hub.Client, error) {
	token, source, err := hub.LoadToken(e.getenv, cfg.TokenFile)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(e.stdout, "hub token: %s\n", source)
	return hub.NewClient(cfg.Endpoint, token, hub.ClientOptions{
		Retry:     hub.RetryPolicy{Attempts: cfg.Retries},
		UserAgent: "genqctl",
	})
}

func (cfg *downloadConfig) reporter(e env) hub.Reporter {
	mode := cfg.Progress
	if mode == "auto" {
		mode = "lines"
		if isTerminal(e.stderr) {
			mode = "bar"
		}
	}
	switch mode {
	case "none":
		return hub.NopReporter{}
	case "bar":
		return hub.NewBarReporter(e.stdout, e.stderr)
	}
	return hub.NewLineReporter(e.stdout, 30*time.Second)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func printSummary(w io.Writer, opts hub.Options, res *hub.Result) {
	if res == nil {
		return
	}
	fmt.Fprintf(w, "summary: downloaded %d files (%s) in %.1fs; skipped %d complete files (%s); %d files left out by the patterns",
		res.Downloaded, hub.FormatBytes(res.DownloadedBytes), res.Elapsed.Seconds(),
		res.Skipped, hub.FormatBytes(res.SkippedBytes), res.Excluded)
	if len(res.Refused) > 0 {
		fmt.Fprintf(w, "; %d unsafe names refused", len(res.Refused))
	}
	fmt.Fprintln(w)
	if m := res.Manifest; m != nil {
		fmt.Fprintf(w, "model: %s at commit %s, %d files, %s, in %s (manifest %s)\n",
			m.Repo, m.Commit, len(m.Files), hub.FormatBytes(m.TotalSize()), opts.Dir, hub.ManifestName)
	}
}

func patternList(p []string) string {
	if len(p) == 0 {
		return "(all)"
	}
	return strings.Join(p, " ")
}
