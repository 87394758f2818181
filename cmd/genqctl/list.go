package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/envflag"
)

// runList handles "genqctl list deployments": a table of the genq
// deployments in the current kube context, with their URLs.
func runList(ctx context.Context, args []string, e env) error {
	const usage = "usage: genqctl list deployments [--namespace NS] [--kubeconfig FILE] [--context NAME]"
	if len(args) == 0 || (args[0] != "deployments" && args[0] != "deployment" && args[0] != "deploy") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(e.stderr, usage)
			return flag.ErrHelp
		}
		return usageError{usage}
	}
	var c ctlconfig.List
	fs := envflag.New("genqctl list deployments", e.getenv, e.stderr)
	c.Register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q; %s", fs.Arg(0), usage)}
	}
	namespace, kubeconfig, kubeContext := c.Namespace, c.Kubeconfig, c.Context
	cluster, err := connectCluster(kubeconfig, kubeContext)
	if err != nil {
		return err
	}
	deps, err := cluster.List(ctx, namespace)
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	if len(deps) == 0 {
		where := "any namespace"
		if namespace != "" {
			where = "namespace " + namespace
		}
		fmt.Fprintf(e.stdout, "no genq deployments in %s of context %q; genqctl deploy makes one\n", where, cluster.Context)
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tVARIANT\tGPU\tWORKERS\tURL")
	for _, d := range deps {
		gpu := strconv.Itoa(d.GPUs) + "x " + d.GPUType
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", d.Name, d.Namespace, d.Variant, gpu, d.WorkersReady, d.WorkersDesired, d.URL)
	}
	return tw.Flush()
}
