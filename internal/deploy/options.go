package deploy

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/genq/genq/internal/genq"
)

// Options is everything a rendering depends on. DefaultOptions fills the
// variant's defaults; the deploy command overrides them from its flags.
type Options struct {
	Name      string // prefix of every object: <name>-api, <name>-worker, …
	Namespace string
	Variant   genq.Variant

	GPUs           int      // nvidia.com/gpu per worker
	GPUType        string   // a name from GPUTypes
	GPULabel       string   // node label that selects the GPU type
	GPULabelValues []string // its accepted values; empty: the type's products

	Registry string // images are <registry>/genq-api:<tag> and <registry>/genq-worker-<v>:<tag>
	Tag      string

	NATSURL                string // what the api and workers connect to
	NATSMonitoringEndpoint string // host:port of NATS monitoring, read by KEDA
	NATSReplicas           int    // JetStream replicas of genq's streams and buckets
	NATSNamespace          string // where nats-server runs and reads NATSUsersSecret

	APIMinReplicas, APIMaxReplicas int
	ServiceType                    corev1.ServiceType

	MaxWorkers      int
	Slots           int           // jobs a worker runs at once; also KEDA's lag per worker
	GenerateTimeout time.Duration // the longest a job served over HTTP lives
	DrainGrace      time.Duration // a stopping worker's time for its jobs in flight
	CooldownPeriod  time.Duration // idle time before KEDA scales the workers to zero

	// Models are the catalogue's models that get workers of their own
	// (ParseCatalog), ModelsJSON the catalogue the pods read, ModelsClaim
	// the volume claim holding the models' files (models.go).
	Models      []genq.Model
	ModelsJSON  []byte
	ModelsClaim string
}

// DefaultOptions are the defaults for a variant. GPUs and GPUType are left
// for the caller: the deploy command requires them, since no GPU choice
// fits every cluster.
func DefaultOptions(v genq.Variant) Options {
	return Options{
		Name:                   "genq-" + strings.ToLower(string(v)),
		Namespace:              "genq",
		Variant:                v,
		GPULabel:               DefaultGPULabel,
		Registry:               "genq",
		Tag:                    "latest",
		NATSURL:                "nats://nats.nats.svc.cluster.local:4222",
		NATSMonitoringEndpoint: "nats-headless.nats.svc.cluster.local:8222",
		NATSReplicas:           3,
		NATSNamespace:          "nats",
		APIMinReplicas:         2,
		APIMaxReplicas:         10,
		ServiceType:            corev1.ServiceTypeLoadBalancer,
		MaxWorkers:             4,
		Slots:                  v.Spec().Slots,
		GenerateTimeout:        5 * time.Minute,
		DrainGrace:             5 * time.Minute,
		CooldownPeriod:         5 * time.Minute,
	}
}

// Validate reports every problem at once, each naming the flag to fix.
func (o Options) Validate() error {
	var errs []error
	if _, err := genq.ParseVariant(string(o.Variant)); err != nil {
		errs = append(errs, fmt.Errorf("--variant: %w", err))
	}
	if err := CheckGPUCount(o.GPUs); err != nil {
		errs = append(errs, err)
	}
	if _, err := LookupGPUType(o.GPUType); err != nil {
		errs = append(errs, fmt.Errorf("--gpu-type: %w", err))
	}
	// <name>-worker is the longest derived name; Services need DNS-1035.
	for _, msg := range validation.IsDNS1035Label(o.Name + "-worker") {
		errs = append(errs, fmt.Errorf("--name %q: %s", o.Name, msg))
	}
	for _, msg := range validation.IsDNS1123Label(o.Namespace) {
		errs = append(errs, fmt.Errorf("--namespace %q: %s", o.Namespace, msg))
	}
	for _, msg := range validation.IsQualifiedName(o.GPULabel) {
		errs = append(errs, fmt.Errorf("--gpu-label %q: %s", o.GPULabel, msg))
	}
	for _, v := range o.GPULabelValues {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("--gpu-label-value %q: %s", v, msg))
		}
	}
	if o.Registry == "" || o.Tag == "" {
		errs = append(errs, errors.New("--registry and --tag must not be empty"))
	}
	if !strings.HasPrefix(o.NATSURL, "nats://") && !strings.HasPrefix(o.NATSURL, "tls://") {
		errs = append(errs, fmt.Errorf("--nats-url %q: want nats://host:port or tls://host:port", o.NATSURL))
	}
	if o.NATSMonitoringEndpoint == "" || strings.Contains(o.NATSMonitoringEndpoint, "://") {
		errs = append(errs, fmt.Errorf("--nats-monitoring %q: want host:port, without a scheme (KEDA adds it)", o.NATSMonitoringEndpoint))
	}
	for _, msg := range validation.IsDNS1123Label(o.NATSNamespace) {
		errs = append(errs, fmt.Errorf("--nats-namespace %q: %s", o.NATSNamespace, msg))
	}
	if o.NATSReplicas < 1 || o.NATSReplicas > 5 {
		errs = append(errs, fmt.Errorf("--nats-replicas %d: JetStream allows 1 to 5", o.NATSReplicas))
	}
	if o.APIMinReplicas < 1 || o.APIMaxReplicas < o.APIMinReplicas {
		errs = append(errs, fmt.Errorf("api replicas %d..%d: want 1 <= min <= max", o.APIMinReplicas, o.APIMaxReplicas))
	}
	if !slices.Contains([]corev1.ServiceType{corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort}, o.ServiceType) {
		errs = append(errs, fmt.Errorf("--service-type %q: want LoadBalancer, NodePort or ClusterIP", o.ServiceType))
	}
	if o.MaxWorkers < 1 {
		errs = append(errs, fmt.Errorf("--max-workers %d: want at least 1", o.MaxWorkers))
	}
	if o.Slots < 1 {
		errs = append(errs, fmt.Errorf("--slots %d: want at least 1", o.Slots))
	}
	// A worker told to stop keeps its jobs for DrainGrace; a job over HTTP
	// lives up to GenerateTimeout. Shorter, and a scale-down cuts jobs short.
	if o.DrainGrace < o.GenerateTimeout {
		errs = append(errs, fmt.Errorf("--drain-grace %s is shorter than a job (GENERATE_TIMEOUT %s)", o.DrainGrace, o.GenerateTimeout))
	}
	if err := o.validateModels(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// gpuValues are the label values that select the GPU type.
func (o Options) gpuValues() []string {
	if len(o.GPULabelValues) > 0 {
		return o.GPULabelValues
	}
	g, _ := LookupGPUType(o.GPUType)
	return g.Products
}

// terminationGrace exceeds the drain grace, so the kubelet never kills a
// worker that is still handing its jobs back.
func (o Options) terminationGrace() time.Duration { return o.DrainGrace + 30*time.Second }

// APIImage and WorkerImage name the images the manifests run.
func (o Options) APIImage() string { return o.Registry + "/genq-api:" + o.Tag }

func (o Options) WorkerImage() string {
	return o.Registry + "/genq-worker-" + strings.ToLower(string(o.Variant)) + ":" + o.Tag
}
