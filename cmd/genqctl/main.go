// Command genqctl is genq's operator CLI: it submits batches of jobs straight
// to NATS, writes tiny models for tests and demos, and downloads real models.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/genq/genq/internal/shutdown"
)

// env is what every subcommand gets from the process.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, args []string, e env) error
}

func commands() map[string]command {
	return map[string]command{
		"submit":   {"publish a JSON-lines file of prompts as jobs and collect the results", runSubmit},
		"models":   {"write tiny generated models (models tiny --variant A|B|C --dir DIR)", runModels},
		"download": {"download a model snapshot from the model hub", runDownload},
		"deploy":   {"deploy a variant to the current Kubernetes context (deploy --gpus N --gpu-type T)", runDeploy},
		"list":     {"list genq deployments and their URLs (list deployments)", runList},
		"keys":     {"add, list and remove API keys with tenants and limits in GENQ_KEYS (keys add|list|remove)", runKeys},
	}
}

func main() {
	ctx, stop := shutdown.OnSignal(context.Background())
	defer stop()
	e := env{getenv: os.Getenv, stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	if err := run(ctx, os.Args[1:], e); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "genqctl:", err)
		}
		os.Exit(exitCode(err))
	}
}

// exitCode is 2 for usage errors, 1 for everything else.
func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) || errors.Is(err, flag.ErrHelp) {
		return 2
	}
	return 1
}

type usageError struct{ msg string }

// flagError is a flag-parsing error as a command returns it: --help stays
// flag.ErrHelp, which main does not print as an error.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
}

func (u usageError) Error() string { return u.msg }

func run(ctx context.Context, args []string, e env) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stderr, cmds)
		if len(args) == 0 {
			return usageError{"no command given"}
		}
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		usage(e.stderr, cmds)
		return usageError{fmt.Sprintf("unknown command %q", args[0])}
	}
	return cmd.run(ctx, args[1:], e)
}

func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: genqctl <command> [flags]\n\ncommands:")
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun genqctl <command> --help for a command's flags.")
}
