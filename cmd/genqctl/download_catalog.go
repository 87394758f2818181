package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/hub"
)

// downloadCatalog downloads, one after the other, every model of the
// catalogue cfg.ModelsFile that names its hub repository, each into the
// directory of its path (the path itself when it is a directory, or has
// no .gguf ending). A model that fails does not stop the others; the
// command fails naming every one that did.
func downloadCatalog(ctx context.Context, cfg *downloadConfig, e env) error {
	spec, err := catalog.ReadFile(cfg.ModelsFile)
	if err != nil {
		return usageError{err.Error()}
	}
	client, err := cfg.client(e)
	if err != nil {
		return err
	}
	var failed []error
	fetched := 0
	for i, m := range spec.Models {
		if m.Hub == nil {
			continue
		}
		opts, err := catalogOptions(cfg, m)
		if err != nil {
			return usageError{fmt.Sprintf("--models-file: model %d: %v", i, err)}
		}
		fmt.Fprintf(e.stdout, "downloading %s (%s@%s) into %s (include %s)\n", modelLabel(m), opts.Repo, opts.Revision, opts.Dir, patternList(opts.Include))
		opts.Reporter = cfg.reporter(e)
		res, err := client.Download(ctx, opts)
		printSummary(e.stdout, opts, res)
		fetched++
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: what was fetched is kept; run the same command again to resume: %w", ctx.Err())
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", modelLabel(m), err))
		}
	}
	if fetched == 0 {
		return usageError{fmt.Sprintf("--models-file %s: no model names its hub repository (\"hub\": {\"repo\": …})", cfg.ModelsFile)}
	}
	return errors.Join(failed...)
}

// catalogOptions are the hub options of one catalogue model.
func catalogOptions(cfg *downloadConfig, m catalog.ModelSpec) (hub.Options, error) {
	if m.Hub.Repo == "" || m.Path == "" {
		return hub.Options{}, errors.New("a model to download needs hub.repo and a path to put it")
	}
	dir := m.Path
	if strings.HasSuffix(dir, ".gguf") {
		dir = filepath.Dir(dir)
	}
	if st, err := os.Stat(m.Path); err == nil && !st.IsDir() {
		dir = filepath.Dir(m.Path)
	}
	opts := hub.Options{Repo: m.Hub.Repo, Revision: m.Hub.Revision, Dir: dir, Include: m.Hub.Include,
		Parallel: cfg.Parallel, StallTimeout: cfg.StallTimeout}
	if opts.Revision == "" {
		opts.Revision = "main"
	}
	if !cfg.NoDefaultExcludes {
		opts.Exclude = hub.DefaultExcludes()
	}
	opts.Exclude = append(opts.Exclude, cfg.Exclude...)
	return opts, nil
}

func modelLabel(m catalog.ModelSpec) string {
	if m.Name != "" {
		return m.Name
	}
	return m.Path
}
