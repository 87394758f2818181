package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/genq/genq/internal/config/ctlconfig"
	"github.com/genq/genq/internal/deploy"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub"
)

// connectCluster opens the current kube context; tests replace it.
var connectCluster = deploy.Connect

type deployConfig struct{ ctlconfig.Deploy }

// runDeploy handles "genqctl deploy": it renders the manifests of one
// variant and server-side applies them to the current kube context, then
// waits for the api and prints its URL; --dry-run prints them instead.
func runDeploy(ctx context.Context, args []string, e env) error {
	cfg, err := parseDeployFlags(args, e)
	if err != nil {
		return err
	}
	objs, err := deploy.Render(cfg.Opts)
	if err != nil {
		return usageError{err.Error()}
	}
	if cfg.DryRun {
		y, err := deploy.YAML(objs)
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(y)
		return err
	}

	// Secret values go into Secrets only here, never into printed YAML.
	// Without a hub token its Secret is left as it is rather than emptied.
	base := withoutSecret(objs)
	objs = []deploy.Object{base[0]} // the Namespace, before what lives in it
	if token := hubToken(e.getenv); token != "" {
		secret, err := deploy.HubTokenSecret(cfg.Opts, token)
		if err != nil {
			return err
		}
		objs = append(objs, secret)
	} else {
		fmt.Fprintf(e.stderr, "genqctl: no hub token in $%s: the Secret %s-hub-token is left as it is\n", strings.Join(hub.TokenEnvVars(), ", $"), cfg.Opts.Name)
	}

	cluster, err := connectCluster(cfg.Kubeconfig, cfg.Context)
	if err != nil {
		return err
	}
	// The NATS passwords and the api key: the cluster's, or new random
	// ones. Never printed; the commands below say how to read them.
	creds, err := cluster.Credentials(ctx, cfg.Opts)
	if err != nil {
		return err
	}
	secrets, err := deploy.CredentialSecrets(cfg.Opts, creds)
	if err != nil {
		return err
	}
	objs = append(append(objs, secrets...), base[1:]...)
	fmt.Fprintf(e.stdout, "deploying %s (variant %s, %d× %s per worker) to namespace %s of context %q\n",
		cfg.Opts.Name, cfg.Opts.Variant, cfg.Opts.GPUs, cfg.Opts.GPUType, cfg.Opts.Namespace, cluster.Context)
	err = cluster.Apply(ctx, objs, func(o deploy.Object) { fmt.Fprintf(e.stdout, "  applied %s\n", o.Name()) })
	if err != nil {
		return err
	}
	if creds.NewNATS {
		// nats-server reads its users' passwords at start only.
		fmt.Fprintf(e.stderr, "genqctl: created the NATS passwords (Secret %s/%s); if NATS was already running, restart it so it reads them: kubectl -n %s rollout restart statefulset/nats\n",
			cfg.Opts.NATSNamespace, deploy.NATSUsersSecret, cfg.Opts.NATSNamespace)
	}
	if cfg.Wait <= 0 {
		fmt.Fprintf(e.stdout, "applied; not waiting (--wait 0): genqctl list deployments shows the URL once the api is up\n")
		printAPIKeyUse(e, cfg.Opts, "$URL")
		return nil
	}
	fmt.Fprintf(e.stdout, "waiting up to %s for the api and its address…\n", cfg.Wait)
	wctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	defer cancel()
	url, err := cluster.WaitReady(wctx, cfg.Opts, 3*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s is ready: %s\n", cfg.Opts.Name, url)
	fmt.Fprintf(e.stdout, "workers start on the first job; GET %s/readiness wakes one ahead of traffic\n", url)
	printAPIKeyUse(e, cfg.Opts, url)
	// The api being up says nothing of the scaler; a trigger that cannot
	// read NATS would leave the workers at zero, so say so now.
	if ok, msg, err := cluster.ScalerStatus(ctx, cfg.Opts); err != nil || !ok {
		if err != nil {
			msg = err.Error()
		}
		fmt.Fprintf(e.stderr, "genqctl: warning: KEDA's ScaledObject %s-worker is not ready: %s (kubectl -n %s describe scaledobject %s-worker)\n",
			cfg.Opts.Name, msg, cfg.Opts.Namespace, cfg.Opts.Name)
	}
	return nil
}

func parseDeployFlags(args []string, e env) (*deployConfig, error) {
	fs := envflag.New("genqctl deploy", e.getenv, e.stderr)
	cfg := &deployConfig{}
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
	v, err := genq.ParseVariant(cfg.Variant)
	if err != nil {
		return nil, usageError{"--variant: " + err.Error()}
	}
	var missing []string
	if cfg.Opts.GPUs == 0 {
		missing = append(missing, "--gpus")
	}
	if cfg.Opts.GPUType == "" {
		missing = append(missing, "--gpu-type")
	}
	if len(missing) > 0 {
		return nil, usageError{fmt.Sprintf("%s required: usage: genqctl deploy --gpus 1|2|4|8 --gpu-type %s [--variant A|B|C] [--name NAME] [--namespace NS] [--dry-run]",
			strings.Join(missing, " and "), strings.Join(deploy.GPUTypeNames(), "|"))}
	}
	// Flags left empty take the variant's defaults.
	def := deploy.DefaultOptions(v)
	o := &cfg.Opts
	o.Variant = v
	o.GPUType = strings.ToLower(strings.TrimSpace(o.GPUType))
	o.GPULabelValues = cfg.GPUValues
	o.ServiceType = corev1.ServiceType(cfg.ServiceType)
	fill(&o.Name, def.Name)
	fill(&o.NATSURL, def.NATSURL)
	fill(&o.NATSMonitoringEndpoint, def.NATSMonitoringEndpoint)
	fill(&o.NATSNamespace, def.NATSNamespace)
	if o.MaxWorkers == 0 {
		o.MaxWorkers = def.MaxWorkers
	}
	if o.NATSReplicas == 0 {
		o.NATSReplicas = def.NATSReplicas
	}
	o.APIMinReplicas, o.APIMaxReplicas = def.APIMinReplicas, def.APIMaxReplicas
	o.Slots, o.GenerateTimeout, o.DrainGrace, o.CooldownPeriod = def.Slots, def.GenerateTimeout, def.DrainGrace, def.CooldownPeriod
	if cfg.ModelsFile != "" {
		data, err := os.ReadFile(cfg.ModelsFile)
		if err != nil {
			return nil, usageError{"--models-file: " + err.Error()}
		}
		if o.ModelsJSON, o.Models, err = deploy.ParseCatalog(data, v); err != nil {
			return nil, usageError{err.Error()}
		}
	}
	if err := o.Validate(); err != nil {
		return nil, usageError{err.Error()}
	}
	return cfg, nil
}

// printAPIKeyUse says how to call /generate with the api key: the command
// that reads it from its Secret, never the key, which would end up in
// terminals' scrollback and CI logs.
func printAPIKeyUse(e env, o deploy.Options, url string) {
	fmt.Fprintf(e.stdout, "POST /generate needs the api key (Secret %s/%s-api-key):\n", o.Namespace, o.Name)
	fmt.Fprintf(e.stdout, "  KEY=$(kubectl -n %s get secret %s-api-key -o jsonpath='{.data.%s}' | base64 -d)\n", o.Namespace, o.Name, deploy.APIKeysKey)
	fmt.Fprintf(e.stdout, "  curl -s -X POST %s/generate -H \"Authorization: Bearer $KEY\" -H 'Content-Type: application/json' -d '{\"text\":\"Write a haiku about queues.\"}'\n", url)
}

func fill(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func withoutSecret(objs []deploy.Object) []deploy.Object {
	out := objs[:0:0]
	for _, o := range objs {
		if o.Manifest.GetKind() != "Secret" {
			out = append(out, o)
		}
	}
	return out
}

// hubToken reads the token the way genqctl download does, from the
// environment only: a deploy has no BuildKit secret file.
func hubToken(getenv func(string) string) string {
	for _, name := range hub.TokenEnvVars() {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
	}
	return ""
}
