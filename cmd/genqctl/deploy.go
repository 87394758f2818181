package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/genq/genq/internal/deploy"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub"
)

// connectCluster opens the current kube context; tests replace it.
var connectCluster = deploy.Connect

type deployConfig struct {
	opts       deploy.Options
	variant    string
	gpuValues  []string
	service    string
	dryRun     bool
	wait       time.Duration
	kubeconfig string
	context    string
}

// runDeploy handles "genqctl deploy": it renders the manifests of one
// variant and server-side applies them to the current kube context, then
// waits for the api and prints its URL; --dry-run prints them instead.
func runDeploy(ctx context.Context, args []string, e env) error {
	cfg, err := parseDeployFlags(args, e)
	if err != nil {
		return err
	}
	objs, err := deploy.Render(cfg.opts)
	if err != nil {
		return usageError{err.Error()}
	}
	if cfg.dryRun {
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
		secret, err := deploy.HubTokenSecret(cfg.opts, token)
		if err != nil {
			return err
		}
		objs = append(objs, secret)
	} else {
		fmt.Fprintf(e.stderr, "genqctl: no hub token in $%s: the Secret %s-hub-token is left as it is\n", strings.Join(hub.TokenEnvVars(), ", $"), cfg.opts.Name)
	}

	cluster, err := connectCluster(cfg.kubeconfig, cfg.context)
	if err != nil {
		return err
	}
	// The NATS passwords and the api key: the cluster's, or new random
	// ones. Never printed; the commands below say how to read them.
	creds, err := cluster.Credentials(ctx, cfg.opts)
	if err != nil {
		return err
	}
	secrets, err := deploy.CredentialSecrets(cfg.opts, creds)
	if err != nil {
		return err
	}
	objs = append(append(objs, secrets...), base[1:]...)
	fmt.Fprintf(e.stdout, "deploying %s (variant %s, %d× %s per worker) to namespace %s of context %q\n",
		cfg.opts.Name, cfg.opts.Variant, cfg.opts.GPUs, cfg.opts.GPUType, cfg.opts.Namespace, cluster.Context)
	err = cluster.Apply(ctx, objs, func(o deploy.Object) { fmt.Fprintf(e.stdout, "  applied %s\n", o.Name()) })
	if err != nil {
		return err
	}
	if creds.NewNATS {
		// nats-server reads its users' passwords at start only.
		fmt.Fprintf(e.stderr, "genqctl: created the NATS passwords (Secret %s/%s); if NATS was already running, restart it so it reads them: kubectl -n %s rollout restart statefulset/nats\n",
			cfg.opts.NATSNamespace, deploy.NATSUsersSecret, cfg.opts.NATSNamespace)
	}
	if cfg.wait <= 0 {
		fmt.Fprintf(e.stdout, "applied; not waiting (--wait 0): genqctl list deployments shows the URL once the api is up\n")
		printAPIKeyUse(e, cfg.opts, "$URL")
		return nil
	}
	fmt.Fprintf(e.stdout, "waiting up to %s for the api and its address…\n", cfg.wait)
	wctx, cancel := context.WithTimeout(ctx, cfg.wait)
	defer cancel()
	url, err := cluster.WaitReady(wctx, cfg.opts, 3*time.Second)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s is ready: %s\n", cfg.opts.Name, url)
	fmt.Fprintf(e.stdout, "workers start on the first job; GET %s/readiness wakes one ahead of traffic\n", url)
	printAPIKeyUse(e, cfg.opts, url)
	// The api being up says nothing of the scaler; a trigger that cannot
	// read NATS would leave the workers at zero, so say so now.
	if ok, msg, err := cluster.ScalerStatus(ctx, cfg.opts); err != nil || !ok {
		if err != nil {
			msg = err.Error()
		}
		fmt.Fprintf(e.stderr, "genqctl: warning: KEDA's ScaledObject %s-worker is not ready: %s (kubectl -n %s describe scaledobject %s-worker)\n",
			cfg.opts.Name, msg, cfg.opts.Namespace, cfg.opts.Name)
	}
	return nil
}

func parseDeployFlags(args []string, e env) (*deployConfig, error) {
	fs := envflag.New("genqctl deploy", e.getenv, e.stderr)
	cfg := &deployConfig{}
	fs.String(&cfg.variant, "variant", "VARIANT", "B", "variant to deploy: A, B (text) or C (images)")
	fs.Int(&cfg.opts.GPUs, "gpus", "", 0, "GPUs per worker: 1, 2, 4 or 8 (required)")
	fs.String(&cfg.opts.GPUType, "gpu-type", "", "", "GPU type: "+strings.Join(deploy.GPUTypeNames(), ", ")+" (required; a100 for A, a10g for B and C)")
	fs.String(&cfg.opts.Name, "name", "GENQ_DEPLOYMENT", "", "deployment name, the prefix of its objects (default genq-<variant>)")
	fs.String(&cfg.opts.Namespace, "namespace", "GENQ_NAMESPACE", "genq", "namespace, created when missing")
	fs.BoolVar(&cfg.dryRun, "dry-run", false, "print the manifests instead of applying them")
	fs.String(&cfg.opts.GPULabel, "gpu-label", "GENQ_GPU_LABEL", deploy.DefaultGPULabel, "node label that tells GPU types apart")
	fs.List(&cfg.gpuValues, "gpu-label-value", "GENQ_GPU_LABEL_VALUE", "accepted value of --gpu-label, repeatable (default: the GPU type's products, docs/deploy.md)")
	fs.String(&cfg.opts.Registry, "registry", "GENQ_REGISTRY", "genq", "image registry and path: images are <registry>/genq-api:<tag> and <registry>/genq-worker-<variant>:<tag>")
	fs.String(&cfg.opts.Tag, "tag", "GENQ_IMAGE_TAG", "latest", "image tag")
	fs.String(&cfg.opts.NATSURL, "nats-url", "GENQ_CLUSTER_NATS_URL", "", "NATS URL inside the cluster (default the official chart's Service in namespace nats)")
	fs.String(&cfg.opts.NATSMonitoringEndpoint, "nats-monitoring", "GENQ_NATS_MONITORING", "", "host:port of NATS monitoring for KEDA (default the chart's headless Service, port 8222)")
	fs.String(&cfg.opts.NATSNamespace, "nats-namespace", "GENQ_NATS_NAMESPACE", "", "namespace of NATS, where its users' passwords are kept (Secret "+deploy.NATSUsersSecret+"; default nats)")
	fs.Int(&cfg.opts.NATSReplicas, "nats-replicas", "GENQ_NATS_REPLICAS", 0, "JetStream replicas of genq's streams and buckets, at most the NATS servers (default 3, as deploy/nats/values.yaml runs)")
	fs.Int(&cfg.opts.MaxWorkers, "max-workers", "GENQ_MAX_WORKERS", 0, "most workers KEDA starts (default 4)")
	fs.String(&cfg.service, "service-type", "GENQ_SERVICE_TYPE", string(corev1.ServiceTypeLoadBalancer), "api Service type: LoadBalancer, NodePort or ClusterIP")
	fs.Duration(&cfg.wait, "wait", "", 10*time.Minute, "how long to wait for the api to be ready (0: do not wait)")
	fs.String(&cfg.kubeconfig, "kubeconfig", "", "", "kube configuration file (default $KUBECONFIG or ~/.kube/config)")
	fs.String(&cfg.context, "context", "", "", "kube context (default the current one)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	v, err := genq.ParseVariant(cfg.variant)
	if err != nil {
		return nil, usageError{"--variant: " + err.Error()}
	}
	var missing []string
	if cfg.opts.GPUs == 0 {
		missing = append(missing, "--gpus")
	}
	if cfg.opts.GPUType == "" {
		missing = append(missing, "--gpu-type")
	}
	if len(missing) > 0 {
		return nil, usageError{fmt.Sprintf("%s required: usage: genqctl deploy --gpus 1|2|4|8 --gpu-type %s [--variant A|B|C] [--name NAME] [--namespace NS] [--dry-run]",
			strings.Join(missing, " and "), strings.Join(deploy.GPUTypeNames(), "|"))}
	}
	// Flags left empty take the variant's defaults.
	def := deploy.DefaultOptions(v)
	o := &cfg.opts
	o.Variant = v
	o.GPUType = strings.ToLower(strings.TrimSpace(o.GPUType))
	o.GPULabelValues = cfg.gpuValues
	o.ServiceType = corev1.ServiceType(cfg.service)
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
