package deploy

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/genq/genq/internal/genq"
)

var update = flag.Bool("update", false, "rewrite the golden manifests in deploy/k8s")

// goldenOptions are what `genqctl deploy --gpus 1 --gpu-type <type>` renders
// for each variant, with the GPU type docs/deploy.md names for it.
func goldenOptions(v genq.Variant) Options {
	o := DefaultOptions(v)
	o.GPUs = 1
	o.GPUType = "a10g"
	if v == genq.VariantA {
		o.GPUType = "a100"
	}
	return o
}

func goldenPath(v genq.Variant) string {
	return filepath.Join("..", "..", "deploy", "k8s", strings.ToLower(string(v)), "genq.yaml")
}

func TestRenderMatchesGolden(t *testing.T) {
	for _, v := range genq.Variants {
		t.Run(string(v), func(t *testing.T) {
			got := renderYAML(t, goldenOptions(v))
			path := goldenPath(v)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/deploy -update to write it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendered manifests differ from %s; if the change is meant, run go test ./internal/deploy -update\n%s", path, firstDiff(string(want), string(got)))
			}
		})
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  golden:   %q\n  rendered: %q", i+1, a, b)
		}
	}
	return ""
}

func renderYAML(t *testing.T, o Options) []byte {
	t.Helper()
	objs, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	y, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	return y
}

// decoded is a rendering read back, strictly, into the API types.
type decoded struct {
	configMaps   []corev1.ConfigMap
	namespaces   []corev1.Namespace
	secrets      []corev1.Secret
	deployments  map[string]appsv1.Deployment // by component
	services     []corev1.Service
	hpas         []autoscalingv2.HorizontalPodAutoscaler
	pdbs         []policyv1.PodDisruptionBudget
	scaledObject []ScaledObject
}

// decodeStrict reads a multi-document stream into the typed objects,
// failing on any field the type does not have.
func decodeStrict(stream []byte) (decoded, error) {
	d := decoded{deployments: map[string]appsv1.Deployment{}}
	for i, doc := range strings.Split(string(stream), "\n---\n") {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return d, fmt.Errorf("document %d: %w", i, err)
		}
		into, add := target(&d, head.APIVersion, head.Kind)
		if into == nil {
			return d, fmt.Errorf("document %d: unexpected %s %s", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			return d, fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
		add()
	}
	return d, nil
}

func target(d *decoded, apiVersion, kind string) (any, func()) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		var o corev1.Namespace
		return &o, func() { d.namespaces = append(d.namespaces, o) }
	case "v1 Secret":
		var o corev1.Secret
		return &o, func() { d.secrets = append(d.secrets, o) }
	case "apps/v1 Deployment":
		var o appsv1.Deployment
		return &o, func() {
			key := o.Labels[LabelComponent]
			if key == "model-worker" {
				key = o.Name // one per model
			}
			d.deployments[key] = o
		}
	case "v1 ConfigMap":
		var o corev1.ConfigMap
		return &o, func() { d.configMaps = append(d.configMaps, o) }
	case "v1 Service":
		var o corev1.Service
		return &o, func() { d.services = append(d.services, o) }
	case "autoscaling/v2 HorizontalPodAutoscaler":
		var o autoscalingv2.HorizontalPodAutoscaler
		return &o, func() { d.hpas = append(d.hpas, o) }
	case "policy/v1 PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		return &o, func() { d.pdbs = append(d.pdbs, o) }
	case "keda.sh/v1alpha1 ScaledObject":
		var o ScaledObject
		return &o, func() { d.scaledObject = append(d.scaledObject, o) }
	}
	return nil, nil
}

func TestDecodeStrictRejectsUnknownFields(t *testing.T) {
	good := renderYAML(t, goldenOptions(genq.VariantB))
	for _, tc := range []struct{ name, from, to string }{
		{"deployment", "  replicas: 0\n", "  replicas: 0\n  replicaz: 1\n"},
		{"container", "        name: worker\n", "        name: worker\n        gpus: 1\n"},
		{"scaledobject", "  minReplicaCount: 0\n", "  minReplicaCount: 0\n  minReplicas: 0\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tc.from, tc.to, 1)
			if bad == string(good) {
				t.Fatalf("%q not found in the rendering", tc.from)
			}
			if _, err := decodeStrict([]byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown field") {
				t.Fatalf("decode of a manifest with an unknown field: err = %v, want unknown field", err)
			}
		})
	}
}

func TestRenderedManifests(t *testing.T) {
	for _, tc := range []struct {
		variant       genq.Variant
		gpus          int
		gpuType       string
		wantProducts  []string
		wantSlots     string
		wantNamespace string
	}{
		{genq.VariantA, 1, "a100", []string{"NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-PCIE-40GB"}, "4", "genq"},
		{genq.VariantB, 1, "a10g", []string{"NVIDIA-A10G"}, "8", "genq"},
		{genq.VariantC, 1, "a10g", []string{"NVIDIA-A10G"}, "1", "genq"},
		{genq.VariantB, 4, "h100", []string{"NVIDIA-H100-80GB-HBM3"}, "8", "genq"},
		{genq.VariantC, 2, "l4", []string{"NVIDIA-L4"}, "1", "genq"},
	} {
		t.Run(fmt.Sprintf("%s-%dx%s", tc.variant, tc.gpus, tc.gpuType), func(t *testing.T) {
			o := DefaultOptions(tc.variant)
			o.GPUs, o.GPUType = tc.gpus, tc.gpuType
			d, err := decodeStrict(renderYAML(t, o))
			if err != nil {
				t.Fatal(err)
			}
			if len(d.namespaces) != 1 || len(d.secrets) != 3 || len(d.services) != 2 || len(d.hpas) != 1 || len(d.pdbs) != 1 || len(d.scaledObject) != 1 || len(d.deployments) != 2 {
				t.Fatalf("objects: %d namespaces, %d secrets, %d services, %d HPAs, %d PDBs, %d ScaledObjects, %d deployments",
					len(d.namespaces), len(d.secrets), len(d.services), len(d.hpas), len(d.pdbs), len(d.scaledObject), len(d.deployments))
			}
			checkAPI(t, o, d)
			checkWorker(t, o, d.deployments["worker"], tc.gpus, tc.wantProducts, tc.wantSlots)
			checkScaledObject(t, o, d.scaledObject[0], tc.wantSlots)
			for _, s := range d.secrets {
				if len(s.Data)+len(s.StringData) != 0 {
					t.Errorf("rendered Secret %s holds data: a printed manifest must never carry a secret", s.Name)
				}
			}
			checkCredentials(t, o, d)
		})
	}
}

func checkAPI(t *testing.T, o Options, d decoded) {
	t.Helper()
	api := d.deployments["api"]
	c := api.Spec.Template.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readiness" {
		t.Errorf("api readiness probe = %+v, want GET /readiness", c.ReadinessProbe)
	}
	if len(c.Ports) != 2 || c.Ports[0].ContainerPort != 80 || env(c, "PORT") != "80" {
		t.Errorf("api listens on %+v with PORT=%q, want 80", c.Ports, env(c, "PORT"))
	}
	// /metrics is on its own port, which the Service does not expose.
	if c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != 9090 || env(c, "METRICS_ADDR") != ":9090" {
		t.Errorf("api metrics on %+v with METRICS_ADDR=%q, want 9090", c.Ports, env(c, "METRICS_ADDR"))
	}
	svc := d.services[0]
	if len(svc.Spec.Ports) != 1 {
		t.Errorf("api Service exposes %+v, want port 80 only", svc.Spec.Ports)
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 80 || !subset(svc.Spec.Selector, api.Spec.Template.Labels) {
		t.Errorf("api Service %+v does not expose the api pods on port 80", svc.Spec)
	}
	// The internal address, inside the cluster only, for KEDA's tenants'
	// trigger (checkScaledObject).
	internal := d.services[1]
	if internal.Name != o.Name+"-internal" || internal.Spec.Type != corev1.ServiceTypeClusterIP || len(internal.Spec.Ports) != 1 ||
		internal.Spec.Ports[0].Port != 9090 || internal.Spec.Ports[0].TargetPort.String() != "metrics" || !subset(internal.Spec.Selector, api.Spec.Template.Labels) {
		t.Errorf("internal Service %s %+v does not expose the api pods' port 9090 in the cluster", internal.Name, internal.Spec)
	}
	if d.hpas[0].Spec.ScaleTargetRef.Name != api.Name || d.hpas[0].Spec.MinReplicas == nil || *d.hpas[0].Spec.MinReplicas < 2 {
		t.Errorf("HPA %+v does not scale the api from 2", d.hpas[0].Spec)
	}
	if !subset(d.pdbs[0].Spec.Selector.MatchLabels, api.Spec.Template.Labels) || d.pdbs[0].Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("PDB %+v does not keep one api pod", d.pdbs[0].Spec)
	}
}

func checkWorker(t *testing.T, o Options, w appsv1.Deployment, gpus int, products []string, slots string) {
	t.Helper()
	spec := w.Spec.Template.Spec
	c := spec.Containers[0]
	limit := c.Resources.Limits["nvidia.com/gpu"]
	if limit.Value() != int64(gpus) {
		t.Errorf("GPU limit %s, want %d", limit.String(), gpus)
	}
	terms := spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	expr := terms[0].MatchExpressions[0]
	if expr.Key != DefaultGPULabel || expr.Operator != corev1.NodeSelectorOpIn {
		t.Errorf("node selection %+v, want %s In", expr, DefaultGPULabel)
	}
	for _, p := range products {
		if !slices.Contains(expr.Values, p) {
			t.Errorf("node selection values %v lack %s", expr.Values, p)
		}
	}
	if w.Labels[LabelGPUType] != o.GPUType {
		t.Errorf("label %s = %q, want %q", LabelGPUType, w.Labels[LabelGPUType], o.GPUType)
	}
	drain, err := time.ParseDuration(env(c, "DRAIN_GRACE"))
	if err != nil {
		t.Fatalf("DRAIN_GRACE: %v", err)
	}
	grace := time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	if grace <= drain || drain < o.GenerateTimeout {
		t.Errorf("termination grace %s, DRAIN_GRACE %s, job up to %s: want grace > drain >= job", grace, drain, o.GenerateTimeout)
	}
	for name, want := range map[string]string{"VARIANT": string(o.Variant), "NATS_URL": o.NATSURL, "MODEL_DIR": "/models", "GENQ_IN_CONTAINER": "1", "SLOTS": slots} {
		if got := env(c, name); got != want {
			t.Errorf("worker %s = %q, want %q", name, got, want)
		}
	}
	if w.Spec.Replicas == nil || *w.Spec.Replicas != 0 {
		t.Errorf("worker replicas %v, want 0 until KEDA sees a job", w.Spec.Replicas)
	}
	if !strings.HasSuffix(c.Image, "/genq-worker-"+strings.ToLower(string(o.Variant))+":latest") {
		t.Errorf("worker image %q is not the variant's", c.Image)
	}
}

func checkScaledObject(t *testing.T, o Options, so ScaledObject, slots string) {
	t.Helper()
	s := so.Spec
	if s.MinReplicaCount == nil || *s.MinReplicaCount != 0 || s.ScaleTargetRef.Name != o.Name+"-worker" {
		t.Errorf("ScaledObject spec %+v: want minReplicaCount 0 on the worker", s)
	}
	if len(s.Triggers) != 3 {
		t.Fatalf("triggers %+v, want two nats-jetstream (interactive and batch) and the tenants' metrics-api", s.Triggers)
	}
	checkTenantsTrigger(t, o, s.Triggers[2], o.Variant, slots)
	for i, tc := range []struct{ name, stream, consumer string }{
		{"interactive", "GENQ_JOBS", "genq-worker-" + string(o.Variant)},
		{"batch", "GENQ_BATCH_JOBS", "genq-worker-batch-" + string(o.Variant)},
	} {
		tr := s.Triggers[i]
		if tr.Type != "nats-jetstream" || tr.Name != tc.name {
			t.Errorf("trigger %d is %s %q, want nats-jetstream %q", i, tr.Type, tr.Name, tc.name)
		}
		want := map[string]string{
			"natsServerMonitoringEndpoint": "nats-headless.nats.svc.cluster.local:8222",
			"stream":                       tc.stream,
			"consumer":                     tc.consumer,
			"lagThreshold":                 slots,
			"activationLagThreshold":       "0",
			"account":                      "$G",
		}
		for k, v := range want {
			if got := tr.Metadata[k]; got != v {
				t.Errorf("trigger %s: %s = %q, want %q", tc.name, k, got, v)
			}
		}
	}
}

// checkTenantsTrigger checks the trigger that scales queue q's workers on
// its tenants' jobs: the api's GET /queue over the internal Service, the
// sum of every tenant consumer's jobs, one worker per slots.
func checkTenantsTrigger(t *testing.T, o Options, tr ScaleTriggers, q genq.Variant, slots string) {
	t.Helper()
	want := map[string]string{
		"url":                   "http://" + o.Name + "-internal." + o.Namespace + ".svc.cluster.local:9090/queue?queue=" + string(q),
		"format":                "json",
		"valueLocation":         "jobs",
		"targetValue":           slots,
		"activationTargetValue": "0",
	}
	if tr.Type != "metrics-api" || tr.Name != "tenants" || !maps.Equal(tr.Metadata, want) {
		t.Errorf("tenants' trigger %s %q %v; want metrics-api \"tenants\" %v", tr.Type, tr.Name, tr.Metadata, want)
	}
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		change  func(*Options)
		wantErr string
	}{
		{"ok", func(*Options) {}, ""},
		{"three GPUs", func(o *Options) { o.GPUs = 3 }, "--gpus 3: want 1, 2, 4 or 8"},
		{"zero GPUs", func(o *Options) { o.GPUs = 0 }, "--gpus 0"},
		{"unknown type", func(o *Options) { o.GPUType = "z80" }, `unknown GPU type "z80": want one of a10g, a100, h100, l4, l40s, t4`},
		{"upper-case type", func(o *Options) { o.GPUType = "A10G" }, ""},
		{"bad name", func(o *Options) { o.Name = "Genq_B" }, `--name "Genq_B"`},
		{"bad namespace", func(o *Options) { o.Namespace = "-x" }, `--namespace "-x"`},
		{"bad label", func(o *Options) { o.GPULabel = "a b" }, `--gpu-label "a b"`},
		{"monitoring with scheme", func(o *Options) { o.NATSMonitoringEndpoint = "http://nats:8222" }, "without a scheme"},
		{"short drain", func(o *Options) { o.DrainGrace = time.Minute }, "shorter than a job"},
		{"service type", func(o *Options) { o.ServiceType = "Ingress" }, "--service-type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := goldenOptions(genq.VariantB)
			tc.change(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestGPULabelOverride(t *testing.T) {
	o := goldenOptions(genq.VariantB)
	o.GPULabel, o.GPULabelValues = "karpenter.k8s.aws/instance-gpu-name", []string{"a10g"}
	d, err := decodeStrict(renderYAML(t, o))
	if err != nil {
		t.Fatal(err)
	}
	expr := d.deployments["worker"].Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0]
	if expr.Key != o.GPULabel || !slices.Equal(expr.Values, []string{"a10g"}) {
		t.Fatalf("node selection %+v, want %s In [a10g]", expr, o.GPULabel)
	}
}

// checkCredentials: the api and the workers connect to NATS as their own
// users, with passwords from the deployment's Secret and their own inbox
// prefixes; the workers reply only to the producers' prefixes; the api
// reads its key from its Secret. Every Secret referred to is rendered.
func checkCredentials(t *testing.T, o Options, d decoded) {
	t.Helper()
	rendered := map[string]bool{}
	for _, s := range d.secrets {
		rendered[s.Name] = true
	}
	for _, tc := range []struct {
		component, user, passwordKey, inbox string
		plain                               map[string]string
		fromSecret                          map[string]string // variable: secret/key
	}{
		{"api", NATSAPIUser, NATSAPIPasswordKey, APIInboxPrefix, nil,
			map[string]string{"API_KEYS": o.Name + "-api-key/API_KEYS"}},
		{"worker", NATSWorkerUser, NATSWorkerPasswordKey, WorkerInboxPrefix,
			map[string]string{"NATS_REPLY_PREFIXES": "_INBOX_api,_INBOX_batch"}, nil},
	} {
		c := d.deployments[tc.component].Spec.Template.Spec.Containers[0]
		plain := map[string]string{"NATS_USER": tc.user, "NATS_INBOX_PREFIX": tc.inbox}
		maps.Copy(plain, tc.plain)
		for name, want := range plain {
			if got := env(c, name); got != want {
				t.Errorf("%s %s = %q, want %q", tc.component, name, got, want)
			}
		}
		refs := map[string]string{"NATS_PASSWORD": o.Name + "-nats/" + tc.passwordKey}
		maps.Copy(refs, tc.fromSecret)
		for name, want := range refs {
			got := ""
			for _, e := range c.Env {
				if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					r := e.ValueFrom.SecretKeyRef
					got = r.Name + "/" + r.Key
					if r.Optional != nil && *r.Optional {
						t.Errorf("%s %s is optional: the pod would start without it", tc.component, name)
					}
				}
			}
			if got != want {
				t.Errorf("%s %s from Secret %q, want %q", tc.component, name, got, want)
			}
			if secret, _, _ := strings.Cut(want, "/"); !rendered[secret] {
				t.Errorf("Secret %s is not rendered", secret)
			}
		}
	}
}
