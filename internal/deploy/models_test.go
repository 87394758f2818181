package deploy

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/genq"
)

const testCatalog = `{"models": [
  {"name": "llama-3.1-8b", "kind": "chat", "variant": "B", "aliases": ["gpt-4o"]},
  {"name": "qwen3-8b", "kind": "chat", "path": "qwen3/Qwen3-8B-Q8_0.gguf"},
  {"name": "mistral-nemo", "kind": "chat", "path": "/data/nemo.gguf"},
  {"name": "bge-small", "kind": "embedding", "path": "bge.gguf"}]}`

func envOf(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// Each chat and embedding model besides the variant's gets a worker
// Deployment serving it alone, scaled by KEDA from its own consumers; the api and the workers
// read the catalogue from a ConfigMap, the files from a volume claim.
func TestRenderModels(t *testing.T) {
	catJSON, models, err := ParseCatalog([]byte(testCatalog), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	if len(models) != 3 || models[2].Name != "bge-small" || models[2].Queue != genq.QueueToken(genq.KindEmbedding, "bge-small") {
		t.Fatalf("models with workers of their own: %+v; want qwen3-8b, mistral-nemo and bge-small", models)
	}
	o := goldenOptions(genq.VariantB)
	o.Models, o.ModelsJSON, o.ModelsClaim = models, catJSON, "genq-models"
	d, err := decodeStrict(renderYAML(t, o))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.configMaps) != 1 || len(d.deployments) != 5 || len(d.scaledObject) != 4 {
		t.Fatalf("%d ConfigMaps, %d Deployments, %d ScaledObjects; want 1, 5 (api, worker and three model workers) and 4",
			len(d.configMaps), len(d.deployments), len(d.scaledObject))
	}
	var spec catalog.FileSpec
	if err := json.Unmarshal([]byte(d.configMaps[0].Data[catalogKey]), &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Models[1].Path != modelsMount+"/qwen3/Qwen3-8B-Q8_0.gguf" || spec.Models[2].Path != "/data/nemo.gguf" {
		t.Errorf("paths in the ConfigMap: %q, %q; want relative ones inside %s, absolute ones kept", spec.Models[1].Path, spec.Models[2].Path, modelsMount)
	}
	if got := envOf(d.deployments["api"].Spec.Template.Spec.Containers[0], "MODELS_FILE"); got != catalogMount+"/"+catalogKey {
		t.Errorf("the api's MODELS_FILE: %q", got)
	}
	for _, m := range models {
		name := o.modelWorkerName(m)
		dep, ok := d.deployments[name]
		if !ok {
			t.Fatalf("no Deployment %s", name)
		}
		c := dep.Spec.Template.Spec.Containers[0]
		if envOf(c, "WORKER_MODELS") != m.Name || envOf(c, "MODELS_FILE") == "" || *dep.Spec.Replicas != 0 {
			t.Errorf("%s: WORKER_MODELS %q, MODELS_FILE %q, replicas %d", name, envOf(c, "WORKER_MODELS"), envOf(c, "MODELS_FILE"), *dep.Spec.Replicas)
		}
		if !slices.ContainsFunc(dep.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "genq-models" && v.PersistentVolumeClaim.ReadOnly
		}) {
			t.Errorf("%s does not mount the models' claim read-only", name)
		}
		// Its selector is its own: the Deployments never share pods.
		if dep.Spec.Selector.MatchLabels[LabelModel] != string(m.Queue) {
			t.Errorf("%s selects %v", name, dep.Spec.Selector.MatchLabels)
		}
		i := slices.IndexFunc(d.scaledObject, func(so ScaledObject) bool { return so.Spec.ScaleTargetRef.Name == name })
		if i < 0 {
			t.Fatalf("no ScaledObject scales %s", name)
		}
		var consumers []string
		triggers := d.scaledObject[i].Spec.Triggers
		for _, tr := range triggers[:min(2, len(triggers))] {
			consumers = append(consumers, tr.Metadata["consumer"])
		}
		if want := "genq-worker-" + string(m.Queue) + ",genq-worker-batch-" + string(m.Queue); strings.Join(consumers, ",") != want || len(triggers) != 3 {
			t.Fatalf("%s scales on %v and %d triggers; want %s and the tenants'", name, consumers, len(triggers), want)
		}
		checkTenantsTrigger(t, o, triggers[2], m.Queue, strconv.Itoa(o.Slots))
		if *d.scaledObject[i].Spec.MinReplicaCount != 0 {
			t.Errorf("%s does not scale to zero", name)
		}
	}
}

func TestModelsRefused(t *testing.T) {
	for _, tc := range []struct {
		what, catalog, want string
	}{
		{"no kind", `{"models":[{"name":"x","path":"x.gguf"}]}`, "needs each model's name and kind"},
		{"no name", `{"models":[{"kind":"chat","path":"x.gguf"}]}`, "needs each model's name and kind"},
		{"another variant", `{"models":[{"name":"x","kind":"chat","variant":"A"}]}`, "serves variant B"},
		{"not JSON", `{`, "--models-file"},
	} {
		if _, _, err := ParseCatalog([]byte(tc.catalog), genq.VariantB); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.what, err, tc.want)
		}
	}
	_, models, err := ParseCatalog([]byte(testCatalog), genq.VariantB)
	if err != nil {
		t.Fatal(err)
	}
	o := goldenOptions(genq.VariantB)
	o.Models = models
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--models-claim") {
		t.Errorf("models without a claim: %v", err)
	}
}
