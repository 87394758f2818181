// Package ctlconfig declares the settings of genqctl's commands
// (cmd/genqctl): every flag and variable in one place, which genqctl
// parses and internal/config writes docs/configuration.md from. Checks of
// the values stay with the commands.
package ctlconfig

import (
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/genq/genq/internal/deploy"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/hub"
	"github.com/genq/genq/internal/natsqueue"
)

// Each command's section in the reference.
const (
	SubmitSection   = "genqctl submit"
	DownloadSection = "genqctl download"
	DeploySection   = "genqctl deploy"
	ModelsSection   = "genqctl models tiny"
	ListSection     = "genqctl list deployments"
	KeysSection     = "genqctl keys"
)

// Submit is genqctl submit's settings.
type Submit struct {
	Variant     string
	In, Out     string
	Concurrency int
	Timeout     time.Duration
	Strict      bool
	NATS        natsqueue.ConnectOptions
}

// Register declares genqctl submit's settings on fs.
func (c *Submit) Register(fs *envflag.Set) {
	fs.Section(SubmitSection)
	fs.String(&c.Variant, "variant", "VARIANT", "B", "variant of the jobs: A, B or C")
	fs.String(&c.In, "in", "", "", "JSON-lines input: one {\"text\": …} per line, with an optional \"id\"")
	fs.String(&c.Out, "out", "", "results", "output directory: results.jsonl, and one PNG per job for images")
	fs.Int(&c.Concurrency, "concurrency", "SUBMIT_CONCURRENCY", 16, "jobs in flight at once")
	fs.Duration(&c.Timeout, "timeout", "SUBMIT_TIMEOUT", 30*time.Minute, "deadline of each job, queueing included")
	fs.Bool(&c.Strict, "strict", "", false, "abort before submitting anything when a line is bad (default: report it and go on)")
	fs.Section("NATS connection")
	c.NATS.RegisterFlags(fs, "nats://127.0.0.1:4222")
}

// Download is genqctl download's settings.
type Download struct {
	Variant, Repo, Revision, Dir string
	InContainer                  bool
	Include, Exclude             []string
	NoDefaultExcludes            bool
	Endpoint, TokenFile          string
	Parallel, Retries            int
	StallTimeout                 time.Duration
	Progress                     string
	Engine                       string
	// ModelsFile downloads every model of a catalogue that says its hub
	// repository, instead of one variant's.
	ModelsFile string
}

// containerDir is where models live inside genq's images (seed rule 1).
const containerDir = "/models"

// Register declares genqctl download's settings on fs.
func (c *Download) Register(fs *envflag.Set) {
	fs.Section(DownloadSection)
	fs.String(&c.Variant, "variant", "VARIANT", "", "variant whose model to download: A, B or C (required, but with --models-file)")
	fs.String(&c.ModelsFile, "models-file", "MODELS_FILE", "", "download every model of this catalogue that names its hub repository (\"hub\": {\"repo\", \"revision\", \"include\"}), each into its path's directory (docs/download.md, \"Several models\")")
	fs.String(&c.Repo, "repo", "GENQ_MODEL_REPO", "", "hub repository id, owner/name (default: the variant's, see docs/download.md)")
	fs.String(&c.Revision, "revision", "GENQ_MODEL_REVISION", "main", "branch, tag or commit sha")
	fs.String(&c.Dir, "dir", "GENQ_MODEL_DIR", "", "target directory (default models/<variant>, or "+containerDir+" when GENQ_IN_CONTAINER=1)")
	fs.Bool(&c.InContainer, "", "GENQ_IN_CONTAINER", false, "set to 1 by genq's images: the default target directory is "+containerDir)
	fs.List(&c.Include, "include", "GENQ_INCLUDE", "glob of files to download, repeatable; * matches across / (default: the variant's patterns when --repo is the variant's)")
	fs.List(&c.Exclude, "exclude", "GENQ_EXCLUDE", "glob of files to skip, repeatable, added to *.pt and *.bin")
	fs.Bool(&c.NoDefaultExcludes, "no-default-excludes", "GENQ_NO_DEFAULT_EXCLUDES", false, "do not skip *.pt and *.bin")
	fs.String(&c.Endpoint, "endpoint", "HF_ENDPOINT", hub.DefaultEndpoint, "hub base URL (the hub's own variable)")
	declareHubTokens(fs)
	fs.String(&c.TokenFile, "token-file", "HF_TOKEN_PATH", "", "file holding the hub token, such as a BuildKit secret /run/secrets/hf_token; "+strings.Join(hub.TokenEnvVars(), ", ")+" win over it")
	fs.Int(&c.Parallel, "parallel", "GENQ_DOWNLOAD_PARALLEL", 4, "files downloaded at once")
	fs.Int(&c.Retries, "retries", "GENQ_DOWNLOAD_RETRIES", 5, "attempts per request, with exponential backoff, on network errors and 5xx")
	fs.Duration(&c.StallTimeout, "stall-timeout", "GENQ_DOWNLOAD_STALL_TIMEOUT", time.Minute, "retry a transfer that receives nothing for this long")
	fs.String(&c.Progress, "progress", "GENQ_PROGRESS", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines or none")
	fs.String(&c.Engine, "engine", "IMAGE_ENGINE", "ggml", "variant C: ggml fetches the diffusers checkpoint and converts it once into ggml/*.gguf (fp16); onnx fetches the ONNX export")
}

// declareHubTokens declares the variables hub.LoadToken reads the hub
// token from, in its order.
func declareHubTokens(fs *envflag.Set) {
	names := hub.TokenEnvVars()
	for i, name := range names {
		usage := "hub access token"
		switch i {
		case 0:
		case 1:
			usage += ", when " + names[0] + " is unset"
		default:
			usage += ", when " + strings.Join(names[:i], " and ") + " are unset"
		}
		fs.Secret(new(string), "", name, usage)
	}
}

// Deploy is genqctl deploy's settings. Options fields left at their zero
// value take the variant's defaults (deploy.DefaultOptions).
type Deploy struct {
	Opts        deploy.Options
	Variant     string
	GPUValues   []string
	ServiceType string
	// ModelsFile is a catalogue of more models, each with workers of its
	// own (deploy.ParseCatalog).
	ModelsFile string
	DryRun     bool
	Wait       time.Duration
	Kubeconfig string
	Context    string
}

// Register declares genqctl deploy's settings on fs.
func (c *Deploy) Register(fs *envflag.Set) {
	def := deploy.DefaultOptions(genq.VariantB)
	fs.Section(DeploySection)
	fs.String(&c.Variant, "variant", "VARIANT", "B", "variant to deploy: A, B (text) or C (images)")
	fs.Int(&c.Opts.GPUs, "gpus", "", 0, "GPUs per worker: 1, 2, 4 or 8 (required)")
	fs.String(&c.Opts.GPUType, "gpu-type", "", "", "GPU type: "+strings.Join(deploy.GPUTypeNames(), ", ")+" (required; a100 for A, a10g for B and C)")
	fs.String(&c.Opts.Name, "name", "GENQ_DEPLOYMENT", "", "deployment name, the prefix of its objects (default genq-<variant>)")
	fs.String(&c.Opts.Namespace, "namespace", "GENQ_NAMESPACE", "genq", "namespace, created when missing")
	fs.Bool(&c.DryRun, "dry-run", "", false, "print the manifests instead of applying them")
	fs.String(&c.Opts.GPULabel, "gpu-label", "GENQ_GPU_LABEL", deploy.DefaultGPULabel, "node label that tells GPU types apart")
	fs.List(&c.GPUValues, "gpu-label-value", "GENQ_GPU_LABEL_VALUE", "accepted value of --gpu-label, repeatable (default: the GPU type's products, docs/deploy.md)")
	fs.String(&c.Opts.Registry, "registry", "GENQ_REGISTRY", "genq", "image registry and path: images are <registry>/genq-api:<tag> and <registry>/genq-worker-<variant>:<tag>")
	fs.String(&c.Opts.Tag, "tag", "GENQ_IMAGE_TAG", "latest", "image tag")
	fs.String(&c.Opts.NATSURL, "nats-url", "GENQ_CLUSTER_NATS_URL", "", "NATS URL inside the cluster, for the api and the workers (default "+def.NATSURL+", the official chart's Service)")
	fs.String(&c.Opts.NATSMonitoringEndpoint, "nats-monitoring", "GENQ_NATS_MONITORING", "", "host:port of NATS monitoring for KEDA (default "+def.NATSMonitoringEndpoint+", the chart's headless Service)")
	fs.String(&c.Opts.NATSNamespace, "nats-namespace", "GENQ_NATS_NAMESPACE", "", "namespace of NATS, where its users' passwords are kept (Secret "+deploy.NATSUsersSecret+"; default "+def.NATSNamespace+")")
	fs.Int(&c.Opts.NATSReplicas, "nats-replicas", "GENQ_NATS_REPLICAS", 0, "JetStream replicas of genq's streams and buckets, the api's NATS_REPLICAS, at most the NATS servers (default "+strconv.Itoa(def.NATSReplicas)+", as deploy/nats/values.yaml runs)")
	fs.Int(&c.Opts.MaxWorkers, "max-workers", "GENQ_MAX_WORKERS", 0, "most workers KEDA starts, its maxReplicaCount (default "+strconv.Itoa(def.MaxWorkers)+")")
	fs.String(&c.ServiceType, "service-type", "GENQ_SERVICE_TYPE", string(corev1.ServiceTypeLoadBalancer), "api Service type: LoadBalancer, NodePort or ClusterIP (behind your own ingress)")
	fs.String(&c.ModelsFile, "models-file", "", "", "a catalogue of more models (MODELS_FILE's JSON, each model with its name and kind): each chat model gets a worker Deployment of its own, scaled by KEDA from its own queue (docs/deploy.md, \"Many models\")")
	fs.String(&c.Opts.ModelsClaim, "models-claim", "GENQ_MODELS_CLAIM", "", "with --models-file: the PersistentVolumeClaim holding the models' files, mounted read-only at /catalog (relative paths of the catalogue are inside it)")
	declareHubTokens(fs)
	fs.Duration(&c.Wait, "wait", "", 10*time.Minute, "how long to wait for the api to be ready and its URL (0: return after applying)")
	fs.String(&c.Kubeconfig, "kubeconfig", "", "", "kube configuration file (default $KUBECONFIG or ~/.kube/config)")
	fs.String(&c.Context, "context", "", "", "kube context (default the current one)")
}

// Models is genqctl models tiny's settings.
type Models struct {
	Variant, Dir, Family, Size, Weights, Engine string
	Seed                                        int64
}

// Register declares genqctl models tiny's settings on fs.
func (c *Models) Register(fs *envflag.Set) {
	fs.Section(ModelsSection)
	fs.String(&c.Variant, "variant", "VARIANT", "B", "variant whose model to write: A, B or C")
	fs.String(&c.Dir, "dir", "", "", "directory to write into (default models/<variant>)")
	fs.String(&c.Family, "family", "", "", "text models only: the model family, llama (Llama 3.x, the default), qwen3 (Qwen3), mistral (Mistral Nemo) or gpt-oss (gpt-oss, harmony), each with its own architecture, tokenizer, special tokens and chat template; the variant still picks the weights' format; or bert, an embedding model (llama.cpp's bert architecture, WordPiece vocabulary, mean pooling; --size tiny or mini, --weights f16 or f32; into models/embedding unless --dir), whatever the variant")
	fs.String(&c.Size, "size", "", "tiny", "tiny (tests); text: mid (about 100M parameters, for CPU benchmarks), 8b or 70b (llama only: Llama 3 shapes with its 128,256-token vocabulary, for GPU benchmarks: 16 GB in BF16, 40 GB in Q4_0); variant C with --engine ggml: medium (SD3-medium's shapes, 15.6 GB in fp16, for GPU benchmarks)")
	fs.String(&c.Weights, "weights", "", "", "text models only: how the matrices are stored, q4_0, f16, bf16 or f32 (default the variant's: q4_0 for A, bf16 for B), to compare formats on the same shape")
	fs.String(&c.Engine, "engine", "", "ggml", "variant C only: ggml writes every part in SD3's real architecture, as the ONNX export and as the ggml engine's GGUF files (f16, or --weights f32), with the same weights, so either engine serves it and the two can be compared; onnx writes the ONNX export alone, with cheap stand-in graphs")
	fs.Int64(&c.Seed, "seed", "", 1, "seed of the random weights: the same seed writes the same model")
}

// List is genqctl list deployments' settings.
type List struct {
	Namespace, Kubeconfig, Context string
}

// Register declares genqctl list deployments' settings on fs.
func (c *List) Register(fs *envflag.Set) {
	fs.Section(ListSection)
	fs.String(&c.Namespace, "namespace", "", "", "namespace to look in (default: all namespaces)")
	fs.String(&c.Kubeconfig, "kubeconfig", "", "", "kube configuration file (default $KUBECONFIG or ~/.kube/config)")
	fs.String(&c.Context, "context", "", "", "kube context (default the current one)")
}

// Keys is genqctl keys' settings.
type Keys struct {
	KeyStdin bool
	NATS     natsqueue.ConnectOptions
}

// Register declares genqctl keys' settings on fs.
func (c *Keys) Register(fs *envflag.Set) {
	fs.Section(KeysSection)
	fs.Bool(&c.KeyStdin, "key-stdin", "", false, "keys add: read the key from standard input rather than make one")
	fs.Section("NATS connection")
	c.NATS.RegisterFlags(fs, "nats://127.0.0.1:4222")
}
