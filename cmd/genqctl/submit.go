package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/logging"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/submit"
)

// submitConfig is what the flags and the environment say.
type submitConfig struct {
	batch   submit.Config
	in, out string
	strict  bool
	nats    natsqueue.ConnectOptions
	queue   natsqueue.Settings
}

// runSubmit handles "genqctl submit": it runs every prompt of a JSON-lines
// file as a job, straight on NATS (internal/batch). A rerun skips the jobs
// already done.
func runSubmit(ctx context.Context, args []string, e env) error {
	cfg, err := parseSubmitFlags(args, e)
	if err != nil {
		return err
	}
	lines, bad, err := readBatch(cfg.in, cfg.batch.Variant)
	if err != nil {
		return err
	}
	for _, b := range bad {
		fmt.Fprintf(e.stderr, "%s line %d: %s\n", cfg.in, b.Line, b.Error)
	}
	if cfg.strict && len(bad) > 0 {
		return fmt.Errorf("%d bad lines in %s; nothing was submitted (--strict)", len(bad), cfg.in)
	}
	journal, err := submit.OpenJournal(cfg.out)
	if err != nil {
		return err
	}
	done, failed, err := journal.Outcomes()
	if err != nil {
		return err
	}
	log, err := logging.New(e.stderr, "warn", "genqctl")
	if err != nil {
		return err
	}
	cfg.nats.Name = "genqctl-submit"
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := natsqueue.Dial(openCtx, cfg.nats, cfg.queue, log, cfg.batch.Variant)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Batch jobs have their own capacity and yield to interactive ones, so
	// a large submit neither fills the api's queue nor delays its callers.
	client, err := natsqueue.NewBatchClient(conn)
	if err != nil {
		return err
	}
	defer client.Close()

	err = submit.NewRunner(cfg.batch, conn, client, journal).Run(ctx, lines, bad, done, failed, e.stderr)
	return errors.Join(err, journal.Close())
}

// readBatch reads the input file whole.
func readBatch(path string, v genq.Variant) ([]submit.Line, []submit.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	defer f.Close()
	lines, bad, err := submit.Read(f, v)
	if err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	return lines, bad, nil
}

func parseSubmitFlags(args []string, e env) (submitConfig, error) {
	var cfg submitConfig
	var c ctlconfig.Submit
	fs := envflag.New("genqctl submit", e.getenv, e.stderr)
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, flagError(err)
	}
	v, err := genq.ParseVariant(c.Variant)
	if err != nil {
		return cfg, usageError{err.Error()}
	}
	cfg.in, cfg.out, cfg.strict, cfg.nats = c.In, c.Out, c.Strict, c.NATS
	// The api owns the queue's settings: use the assets as it made them.
	cfg.queue = natsqueue.DefaultSettings()
	cfg.queue.Adopt = true
	cfg.batch.Variant, cfg.batch.Concurrency, cfg.batch.Timeout = v, c.Concurrency, c.Timeout
	switch {
	case cfg.in == "":
		return cfg, usageError{"--in is required"}
	case cfg.batch.Concurrency < 1:
		return cfg, usageError{"--concurrency must be at least 1"}
	case cfg.batch.Timeout <= 0:
		return cfg, usageError{"--timeout must be positive"}
	}
	return cfg, nil
}
