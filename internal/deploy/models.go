package deploy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/genq"
)

// A deployment of several models (docs/deploy.md, "Many models"): the
// catalogue goes into a ConfigMap that the api and every worker read as
// MODELS_FILE, the models' files are on a volume claim the workers mount
// read-only, and each model besides the variant's own gets a worker
// Deployment of its own (WORKER_MODELS) that KEDA scales from that
// model's consumers, down to zero.

// LabelModel names the model's queue token on a model's worker objects.
const LabelModel = "genq.dev/model"

// Where the catalogue and the model files are in the pods.
const (
	catalogMount = "/etc/genq/catalog"
	catalogKey   = "models.json"
	modelsMount  = "/catalog"
)

// ParseCatalog reads a MODELS_FILE for a deployment. The api reads no
// model file, so every model names its name and kind; relative paths are
// taken inside the volume of model files (modelsMount). It returns the
// file as the pods read it, and the models that get workers of their own:
// every chat and embedding model not on the seed variant's queue.
func ParseCatalog(data []byte, seed genq.Variant) ([]byte, []genq.Model, error) {
	var spec catalog.FileSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, nil, fmt.Errorf("--models-file: %w", err)
	}
	var models []genq.Model
	for i, m := range spec.Models {
		if m.Name == "" || m.Kind == "" {
			return nil, nil, fmt.Errorf("--models-file: model %d: a deployment needs each model's name and kind (the api does not read the files)", i)
		}
		if m.Path != "" && !path.IsAbs(m.Path) {
			spec.Models[i].Path = path.Join(modelsMount, m.Path)
		}
		if m.Variant != "" || (m.Kind != genq.KindChat && m.Kind != genq.KindEmbedding) {
			continue // the variant's workers serve it; image models have no workers of their own yet
		}
		models = append(models, genq.Model{Name: m.Name, Kind: m.Kind, Path: spec.Models[i].Path, Queue: genq.QueueToken(m.Kind, m.Name)})
	}
	if _, err := catalog.FromSpec(spec, seed); err != nil {
		return nil, nil, fmt.Errorf("--models-file: %w", err)
	}
	out, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), models, nil
}

// validateModels checks what a deployment of several models needs.
func (o Options) validateModels() error {
	if len(o.Models) == 0 {
		return nil
	}
	var errs []error
	if o.ModelsClaim == "" {
		errs = append(errs, errors.New("--models-claim: a deployment of several models needs the volume claim that holds their files"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(cmp.Or(o.ModelsClaim, "x")) {
		errs = append(errs, fmt.Errorf("--models-claim %q: %s", o.ModelsClaim, msg))
	}
	for _, m := range o.Models {
		for _, msg := range validation.IsDNS1035Label(o.modelWorkerName(m)) {
			errs = append(errs, fmt.Errorf("model %q: its worker's name %s: %s (a shorter --name or model name)", m.Name, o.modelWorkerName(m), msg))
		}
	}
	return errors.Join(errs...)
}

func (o Options) catalogName() string { return o.Name + "-models" }

// modelWorkerName is the name of model m's worker objects.
func (o Options) modelWorkerName(m genq.Model) string {
	return o.workerName() + "-" + strings.ReplaceAll(string(m.Queue), "_", "-")
}

func (o Options) catalogConfigMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: o.meta(o.catalogName(), "models"),
		Data:       map[string]string{catalogKey: string(o.ModelsJSON)},
	}
}

// withCatalog gives a pod the catalogue as MODELS_FILE.
func (o Options) withCatalog(spec *corev1.PodSpec) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "catalog", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.catalogName()}}}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "catalog", MountPath: catalogMount, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: "MODELS_FILE", Value: catalogMount + "/" + catalogKey})
}

// modelWorker is model m's worker Deployment: the variant's worker, told
// to serve m alone from the volume of model files.
func (o Options) modelWorker(m genq.Model) *appsv1.Deployment {
	d := o.workerDeployment()
	name := o.modelWorkerName(m)
	d.ObjectMeta = o.modelMeta(name, m)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: o.modelSelector(m)}
	d.Spec.Template.ObjectMeta = metav1.ObjectMeta{Labels: o.modelMeta(name, m).Labels}
	spec := &d.Spec.Template.Spec
	o.withCatalog(spec)
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "models", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: o.ModelsClaim, ReadOnly: true}}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "models", MountPath: modelsMount, ReadOnly: true})
	c.Env = append(c.Env, corev1.EnvVar{Name: "WORKER_MODELS", Value: m.Name})
	return d
}

func (o Options) modelSelector(m genq.Model) map[string]string {
	s := o.selector("model-worker")
	s[LabelModel] = string(m.Queue)
	return s
}

func (o Options) modelMeta(name string, m genq.Model) metav1.ObjectMeta {
	meta := o.meta(name, "model-worker")
	meta.Labels[LabelModel] = string(m.Queue)
	return meta
}

// modelScaledObject scales m's workers from m's own consumers.
func (o Options) modelScaledObject(m genq.Model) *ScaledObject {
	so := o.workerScaledObject()
	name := o.modelWorkerName(m)
	so.ObjectMeta = o.modelMeta(name, m)
	so.Spec.ScaleTargetRef = &ScaleTarget{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	so.Spec.Triggers = o.queueTriggers(m.Queue)
	return so
}
