package deploy

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/natsqueue"
)

// Labels every genq object carries; list finds deployments by them.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelPartOf    = "app.kubernetes.io/part-of"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelVariant   = "genq.dev/variant"
	LabelGPUType   = "genq.dev/gpu-type"
	LabelGPUs      = "genq.dev/gpus"

	ManagedBy = "genqctl"

	apiPort        = 80
	apiMetricsPort = 9090 // internal: only the ClusterIP <name>-internal Service exposes it
	metricsPort    = 9091
	// HubTokenKey is the Secret's key, named like the variable that reads it.
	HubTokenKey = "HF_TOKEN"
)

// Object is one rendered manifest with the resource it is applied to.
type Object struct {
	Resource   schema.GroupVersionResource
	Namespaced bool
	Typed      any // the typed value (a k8s.io/api type or ScaledObject)
	Manifest   *unstructured.Unstructured
}

// Name is the object's name, for messages.
func (o Object) Name() string { return o.Manifest.GetKind() + "/" + o.Manifest.GetName() }

var (
	resNamespace    = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	resSecret       = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	resConfigMap    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	resService      = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	resDeployment   = appsv1.SchemeGroupVersion.WithResource("deployments")
	resHPA          = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	resPDB          = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	resScaledObject = KEDAGroupVersion.WithResource("scaledobjects")
)

// Names of a deployment's objects.
func (o Options) apiName() string    { return o.Name + "-api" }
func (o Options) workerName() string { return o.Name + "-worker" }
func (o Options) secretName() string { return o.Name + "-hub-token" }

// Render builds the manifests of one deployment, in the order they are
// applied: what others refer to comes first.
func Render(o Options) ([]Object, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	typed := []typedObject{
		{resNamespace, false, o.namespace()},
		{resSecret, true, o.hubTokenSecret("")},
		// Without their values: deploy applies them filled (secrets.go).
		{resSecret, true, o.natsSecret(nil)},
		{resSecret, true, o.apiKeySecret(nil)},
		{resDeployment, true, o.apiDeployment()},
		{resService, true, o.apiService()},
		{resService, true, o.apiInternalService()},
		{resHPA, true, o.apiHPA()},
		{resPDB, true, o.apiPDB()},
		{resDeployment, true, o.workerDeployment()},
		{resScaledObject, true, o.workerScaledObject()},
	}
	if len(o.Models) > 0 {
		// The api and each model's workers read the catalogue.
		o.withCatalog(&typed[4].obj.(*appsv1.Deployment).Spec.Template.Spec)
		typed = slices.Insert(typed, 1, typedObject{resConfigMap, true, o.catalogConfigMap()})
		for _, m := range o.Models {
			typed = append(typed, typedObject{resDeployment, true, o.modelWorker(m)}, typedObject{resScaledObject, true, o.modelScaledObject(m)})
		}
	}
	objs := make([]Object, 0, len(typed))
	for _, t := range typed {
		u, err := toUnstructured(t.obj)
		if err != nil {
			return nil, err
		}
		objs = append(objs, Object{Resource: t.res, Namespaced: t.namespaced, Typed: t.obj, Manifest: u})
	}
	return objs, nil
}

// typedObject is an object to render, with the resource it is.
type typedObject struct {
	res        schema.GroupVersionResource
	namespaced bool
	obj        any
}

// HubTokenSecret is the Secret holding the hub token. Render leaves the
// value out, so that a printed manifest never carries it; deploy applies
// this one, with the value, only when a token is set.
func HubTokenSecret(o Options, token string) (Object, error) {
	s := o.hubTokenSecret(token)
	u, err := toUnstructured(s)
	if err != nil {
		return Object{}, err
	}
	return Object{Resource: resSecret, Namespaced: true, Typed: s, Manifest: u}, nil
}

// toUnstructured drops what a typed value always marshals but a manifest
// should not hold: an empty status and a null creation time.
func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T: %w", obj, err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	stripTemplateTimestamps(m)
	return &unstructured.Unstructured{Object: m}, nil
}

// stripTemplateTimestamps removes spec.template.metadata.creationTimestamp,
// which a pod template marshals as null.
func stripTemplateTimestamps(m map[string]any) {
	spec, _ := m["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if md, ok := tmpl["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
}

// YAML writes the objects as one multi-document stream.
func YAML(objs []Object) ([]byte, error) {
	var b bytes.Buffer
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(o.Manifest.Object)
		if err != nil {
			return nil, fmt.Errorf("marshal %s: %w", o.Name(), err)
		}
		b.Write(y)
	}
	return b.Bytes(), nil
}

func (o Options) labels(component string) map[string]string {
	l := o.selector(component)
	l[LabelPartOf] = "genq"
	l[LabelManagedBy] = ManagedBy
	l[LabelVariant] = string(o.Variant)
	l[LabelGPUType] = strings.ToLower(o.GPUType)
	l[LabelGPUs] = strconv.Itoa(o.GPUs)
	return l
}

func (o Options) selector(component string) map[string]string {
	m := map[string]string{LabelName: "genq", LabelInstance: o.Name}
	if component != "" {
		m[LabelComponent] = component
	}
	return m
}

func (o Options) meta(name, component string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: o.labels(component)}
}

func (o Options) namespace() *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: map[string]string{LabelPartOf: "genq"}},
	}
}

func (o Options) hubTokenSecret(token string) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: o.meta(o.secretName(), "hub-token"),
		Type:       corev1.SecretTypeOpaque,
	}
	if token != "" {
		// data rather than stringData: the server turns stringData into
		// data, and server-side apply then sees a field it never owned.
		s.Data = map[string][]byte{HubTokenKey: []byte(token)}
	}
	return s
}

// natsEnv is what the api and the workers each need: where NATS is, who
// they are there (user, password from the Secret, inbox prefix:
// docs/protocol.md §9). The JetStream settings are the api's alone: the
// workers adopt the streams and buckets it makes (docs/configuration.md).
func (o Options) natsEnv(user, passwordKey, inboxPrefix string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "VARIANT", Value: string(o.Variant)},
		{Name: "NATS_URL", Value: o.NATSURL},
		{Name: "NATS_USER", Value: user},
		secretRef("NATS_PASSWORD", o.natsSecretName(), passwordKey),
		{Name: "NATS_INBOX_PREFIX", Value: inboxPrefix},
		{Name: "LOG_LEVEL", Value: "info"},
	}
}

// restricted is the container security context of the restricted Pod
// Security Standard.
func restricted(readOnlyRoot bool) *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr(false),
		ReadOnlyRootFilesystem:   ptr(readOnlyRoot),
		RunAsNonRoot:             ptr(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func (o Options) apiDeployment() *appsv1.Deployment {
	env := append(o.natsEnv(NATSAPIUser, NATSAPIPasswordKey, APIInboxPrefix),
		// The Service is public (a LoadBalancer): /generate takes the key.
		secretRef(APIKeysKey, o.apiKeySecretName(), APIKeysKey),
		corev1.EnvVar{Name: "NATS_REPLICAS", Value: strconv.Itoa(o.NATSReplicas)},
		corev1.EnvVar{Name: "PORT", Value: strconv.Itoa(apiPort)},
		corev1.EnvVar{Name: "METRICS_ADDR", Value: ":" + strconv.Itoa(apiMetricsPort)},
		corev1.EnvVar{Name: "GENERATE_TIMEOUT", Value: o.GenerateTimeout.String()},
	)
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			TimeoutSeconds:   2,
			FailureThreshold: failures,
		}
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: o.meta(o.apiName(), "api"),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(o.APIMinReplicas)),
			Selector: &metav1.LabelSelector{MatchLabels: o.selector("api")},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr(intstr.FromInt32(0)), MaxSurge: ptr(intstr.FromInt32(1))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: o.labels("api")},
				Spec: corev1.PodSpec{
					// Requests in flight may take GENERATE_TIMEOUT; the api's
					// own SHUTDOWN_GRACE (60s) is raised to match.
					TerminationGracePeriodSeconds: ptr(int64((o.GenerateTimeout + 30e9).Seconds())),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr(true),
						RunAsUser:    ptr(int64(65532)),
						RunAsGroup:   ptr(int64(65532)),
						// Port 80 without root or capabilities: a safe sysctl.
						Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
					},
					Containers: []corev1.Container{{
						Name:  "api",
						Image: o.APIImage(),
						Env:   append(env, corev1.EnvVar{Name: "SHUTDOWN_GRACE", Value: o.GenerateTimeout.String()}),
						Ports: []corev1.ContainerPort{
							{Name: "http", ContainerPort: apiPort, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: apiMetricsPort, Protocol: corev1.ProtocolTCP},
						},
						// The platform checks health on /readiness (seed rule 1).
						// Liveness reads GET /, which never queues a wake-up.
						ReadinessProbe: probe("/readiness", 10, 3),
						LivenessProbe:  probe("/", 20, 3),
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
						},
						SecurityContext: restricted(true),
					}},
				},
			},
		},
	}
}

func (o Options) apiService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: o.meta(o.Name, "api"),
		Spec: corev1.ServiceSpec{
			Type:     o.ServiceType,
			Selector: o.selector("api"),
			Ports:    []corev1.ServicePort{{Name: "http", Port: apiPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// internalName names the Service of the api pods' internal address, in
// the cluster only: KEDA reads the tenants' queues there (tenantsTrigger).
func (o Options) internalName() string { return o.Name + "-internal" }

func (o Options) apiInternalService() *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: o.meta(o.internalName(), "api"),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: o.selector("api"),
			Ports:    []corev1.ServicePort{{Name: "metrics", Port: apiMetricsPort, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP}},
		},
	}
}

func (o Options) apiHPA() *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: o.meta(o.apiName(), "api"),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: o.apiName()},
			MinReplicas:    ptr(int32(o.APIMinReplicas)),
			MaxReplicas:    int32(o.APIMaxReplicas),
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(70))},
				},
			}},
		},
	}
}

func (o Options) apiPDB() *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: o.meta(o.apiName(), "api"),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: o.selector("api")},
		},
	}
}

// workerMemory is host memory per worker: the model is read through host
// memory before it reaches the GPU.
func workerMemory(v genq.Variant) resource.Quantity {
	switch v {
	case genq.VariantA:
		return resource.MustParse("56Gi") // a 42.5 GB GGUF
	case genq.VariantB:
		return resource.MustParse("24Gi") // a 16 GB GGUF
	}
	return resource.MustParse("24Gi") // SD3 medium, fp16 ONNX
}

func (o Options) workerDeployment() *appsv1.Deployment {
	gpus := resource.MustParse(strconv.Itoa(o.GPUs))
	env := append(o.natsEnv(NATSWorkerUser, NATSWorkerPasswordKey, WorkerInboxPrefix),
		// Replies go only to the producers' inboxes, which is all the
		// workers' NATS user may publish to anyway (natsqueue.ReplyAllowed).
		corev1.EnvVar{Name: "NATS_REPLY_PREFIXES", Value: ReplyPrefixes},
		corev1.EnvVar{Name: "GENQ_IN_CONTAINER", Value: "1"},
		corev1.EnvVar{Name: "MODEL_DIR", Value: "/models"},
		corev1.EnvVar{Name: "SLOTS", Value: strconv.Itoa(o.Slots)},
		corev1.EnvVar{Name: "DRAIN_GRACE", Value: o.DrainGrace.String()},
		corev1.EnvVar{Name: "METRICS_ADDR", Value: ":" + strconv.Itoa(metricsPort)},
		// Used only by an image built without a model, whose entrypoint
		// downloads it at start (docs/deploy.md); optional otherwise.
		corev1.EnvVar{Name: HubTokenKey, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: o.secretName()}, Key: HubTokenKey, Optional: ptr(true),
		}}},
	)
	health := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("metrics")}}
	mem := workerMemory(o.Variant)
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: o.meta(o.workerName(), "worker"),
		Spec: appsv1.DeploymentSpec{
			// KEDA owns the count from here on; it starts at zero, so that
			// nothing holds a GPU until the first job.
			Replicas: ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: o.selector("worker")},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: o.labels("worker")},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr(int64(o.terminationGrace().Seconds())),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr(true),
						RunAsUser:    ptr(int64(10001)),
						RunAsGroup:   ptr(int64(10001)),
						FSGroup:      ptr(int64(10001)),
					},
					Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
								Key: o.GPULabel, Operator: corev1.NodeSelectorOpIn, Values: o.gpuValues(),
							}}}},
						},
					}},
					// GPU node pools are commonly tainted so that only pods
					// asking for GPUs land there.
					Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name:  "worker",
						Image: o.WorkerImage(),
						Env:   env,
						Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP}},
						// /healthz answers once the model is loaded, which
						// takes minutes for a large model on a cold node.
						StartupProbe:   &corev1.Probe{ProbeHandler: health, PeriodSeconds: 10, FailureThreshold: 90},
						ReadinessProbe: &corev1.Probe{ProbeHandler: health, PeriodSeconds: 10},
						LivenessProbe:  &corev1.Probe{ProbeHandler: health, PeriodSeconds: 20, FailureThreshold: 3},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{"nvidia.com/gpu": gpus, corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: mem},
							Limits:   corev1.ResourceList{"nvidia.com/gpu": gpus, corev1.ResourceMemory: mem},
						},
						SecurityContext: restricted(false),
					}},
				},
			},
		},
	}
}

func (o Options) workerScaledObject() *ScaledObject {
	return &ScaledObject{
		TypeMeta:   metav1.TypeMeta{APIVersion: KEDAGroupVersion.String(), Kind: "ScaledObject"},
		ObjectMeta: o.meta(o.workerName(), "worker"),
		Spec: ScaledObjectSpec{
			ScaleTargetRef:  &ScaleTarget{APIVersion: "apps/v1", Kind: "Deployment", Name: o.workerName()},
			PollingInterval: ptr(int32(5)),
			CooldownPeriod:  ptr(int32(o.CooldownPeriod.Seconds())),
			MinReplicaCount: ptr(int32(0)),
			MaxReplicaCount: ptr(int32(o.MaxWorkers)),
			// One trigger per class: each consumer's lag counts jobs queued
			// and running; and one for every tenant's consumers together.
			// KEDA hands the HPA one metric per trigger and the HPA follows
			// the larger demand; any trigger above activation starts the
			// first worker.
			Triggers: o.queueTriggers(o.Variant),
		},
	}
}

// queueTriggers scale queue q's workers: on its shared consumers' lag,
// and on its tenants' jobs.
func (o Options) queueTriggers(q genq.Variant) []ScaleTriggers {
	return []ScaleTriggers{o.queueLagTrigger(natsqueue.Interactive, q), o.queueLagTrigger(natsqueue.Batch, q), o.tenantsTrigger(q)}
}

// tenantsTrigger scales on queue q's tenants' jobs, waiting and running,
// as the api's GET /queue sums them over every tenant's consumer of both
// classes: KEDA's nats-jetstream trigger reads one named consumer, and
// tenants are made at runtime (genqctl keys), after the ScaledObject.
func (o Options) tenantsTrigger(q genq.Variant) ScaleTriggers {
	u := url.URL{Scheme: "http", Host: fmt.Sprintf("%s.%s.svc.cluster.local:%d", o.internalName(), o.Namespace, apiMetricsPort),
		Path: "/queue", RawQuery: url.Values{"queue": {string(q)}}.Encode()}
	return ScaleTriggers{
		Type: "metrics-api",
		Name: "tenants",
		Metadata: map[string]string{
			"url":           u.String(),
			"format":        "json",
			"valueLocation": "jobs",
			// One worker per Slots jobs, as on the shared consumers.
			"targetValue":           strconv.Itoa(o.Slots),
			"activationTargetValue": "0",
		},
	}
}

// queueLagTrigger scales on the lag of class c's consumer of queue q.
func (o Options) queueLagTrigger(c natsqueue.Class, q genq.Variant) ScaleTriggers {
	return ScaleTriggers{
		Type: "nats-jetstream",
		Name: c.String(),
		Metadata: map[string]string{
			"natsServerMonitoringEndpoint": o.NATSMonitoringEndpoint,
			"account":                      "$G",
			"stream":                       c.Stream(),
			"consumer":                     c.Consumer(q),
			// One worker per Slots jobs of the class.
			"lagThreshold": strconv.Itoa(o.Slots),
			// One job (or, on the interactive consumer, one wake-up
			// signal from /readiness) is enough to start the first worker.
			"activationLagThreshold": "0",
		},
	}
}

func ptr[T any](v T) *T { return &v }
