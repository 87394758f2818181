// Package deploy_test checks the deployment files at the repository root:
// docker-compose.yml, loaded with compose-go (the loader docker compose
// itself uses), and the Dockerfiles, read with a small parser of their
// instructions, since no Docker engine is available to build them here.
package deploy_test

import (
	"bufio"
	"context"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/genq"
)

const root = ".."

func loadCompose(t *testing.T, env map[string]string, profiles ...string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	// The NATS passwords come from .genq/nats.env, written at deploy time.
	env = maps.Clone(env)
	for _, role := range []string{"API", "WORKER", "BATCH"} {
		if _, ok := env["GENQ_NATS_"+role+"_PASSWORD"]; !ok {
			env["GENQ_NATS_"+role+"_PASSWORD"] = "test-" + role
		}
	}
	details := types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "docker-compose.yml")}},
		Environment: env,
	}
	p, err := loader.LoadWithContext(context.Background(), details, func(o *loader.Options) {
		o.SetProjectName("genq", true)
		o.Profiles = profiles
	})
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

func TestComposeServicesAndPorts(t *testing.T) {
	p := loadCompose(t, map[string]string{}, "*")
	names := p.ServiceNames()
	slices.Sort(names)
	if !slices.Equal(names, []string{"api", "genqctl", "nats", "worker", "worker-cpu", "worker-models"}) {
		t.Fatalf("services %v", names)
	}
	for _, tc := range []struct {
		service           string
		published, target string
	}{
		{"api", "8080", "80"},
		{"nats", "8222", "8222"},
	} {
		if !hasPort(p.Services[tc.service], tc.published, tc.target) {
			t.Errorf("%s does not publish %s:%s (ports %+v)", tc.service, tc.published, tc.target, p.Services[tc.service].Ports)
		}
	}
	nats := p.Services["nats"]
	// JetStream, monitoring and the users live in the shipped configuration
	// (deploy/nats_test.go starts nats-server with it).
	if cmd := strings.Join(nats.Command, " "); cmd != "--config /etc/nats/genq.conf" {
		t.Errorf("nats command %q does not load the shipped configuration", cmd)
	}
	for _, port := range nats.Ports {
		if port.Target == 4222 || port.HostIP != "127.0.0.1" {
			t.Errorf("nats publishes %+v: clients must stay on compose's network, monitoring on loopback", port)
		}
	}
	for _, svc := range []string{"api", "worker", "worker-cpu"} {
		if s := p.Services[svc]; env(s, "NATS_USER") == "" || env(s, "NATS_PASSWORD") == "" || env(s, "NATS_INBOX_PREFIX") == "" {
			t.Errorf("%s connects to NATS without its user and inbox prefix", svc)
		}
	}
	api := p.Services["api"]
	if env(api, "NATS_URL") != "nats://nats:4222" || env(api, "PORT") != "80" {
		t.Errorf("api environment %v", api.Environment)
	}
	if !slices.Contains(api.Expose, "80") {
		t.Errorf("api exposes %v, want 80", api.Expose)
	}
	if api.Build == nil || api.Build.Dockerfile != "Dockerfile.api" {
		t.Errorf("api build %+v", api.Build)
	}
}

func hasPort(s types.ServiceConfig, published, target string) bool {
	for _, p := range s.Ports {
		if p.Published == published && p.Target == mustAtoi(target) {
			return true
		}
	}
	return false
}

func mustAtoi(s string) uint32 {
	var n uint32
	for _, c := range s {
		n = n*10 + uint32(c-'0')
	}
	return n
}

func env(s types.ServiceConfig, k string) string {
	if v := s.Environment[k]; v != nil {
		return *v
	}
	return ""
}

func TestComposeGPUReservationAndCPUWorker(t *testing.T) {
	p := loadCompose(t, map[string]string{}, "*")
	gpu := p.Services["worker"]
	if gpu.Deploy == nil || gpu.Deploy.Resources.Reservations == nil || len(gpu.Deploy.Resources.Reservations.Devices) != 1 {
		t.Fatalf("worker has no device reservation: %+v", gpu.Deploy)
	}
	dev := gpu.Deploy.Resources.Reservations.Devices[0]
	if dev.Driver != "nvidia" || !slices.Contains(dev.Capabilities, "gpu") || dev.Count != 1 {
		t.Errorf("worker reservation %+v, want driver nvidia, 1 gpu", dev)
	}
	cpu := p.Services["worker-cpu"]
	if cpu.Deploy != nil && cpu.Deploy.Resources.Reservations != nil && len(cpu.Deploy.Resources.Reservations.Devices) > 0 {
		t.Errorf("worker-cpu reserves devices: %+v", cpu.Deploy.Resources.Reservations.Devices)
	}
	if env(cpu, "TEXT_GPU") != "false" || env(cpu, "IMAGE_DEVICE") != "cpu" {
		t.Errorf("worker-cpu does not keep the engines on the CPU: %v", cpu.Environment)
	}
	for _, w := range []types.ServiceConfig{gpu, cpu} {
		if env(w, "NATS_URL") != "nats://nats:4222" || env(w, "MODEL_DIR") != "/models" || env(w, "DRAIN_GRACE") == "" {
			t.Errorf("%s environment %v", w.Name, w.Environment)
		}
		if w.Build == nil || w.Build.Dockerfile != "Dockerfile.worker" || len(w.Build.Secrets) != 1 || w.Build.Secrets[0].Source != "hf_token" {
			t.Errorf("%s build %+v: want Dockerfile.worker with the hf_token secret", w.Name, w.Build)
		}
	}
	if s := p.Secrets["hf_token"]; s.File == "" || s.Environment != "" || s.Content != "" {
		t.Errorf("secret hf_token %+v: want a file, never the value in the compose file", s)
	}
}

func TestComposeProfiles(t *testing.T) {
	for _, tc := range []struct {
		profiles []string
		want     []string
	}{
		{nil, []string{"api", "nats"}},
		{[]string{"gpu"}, []string{"api", "nats", "worker"}},
		{[]string{"cpu"}, []string{"api", "nats", "worker-cpu"}},
		{[]string{"models"}, []string{"api", "nats", "worker-models"}},
	} {
		t.Run(strings.Join(tc.profiles, ","), func(t *testing.T) {
			names := loadCompose(t, map[string]string{}, tc.profiles...).ServiceNames()
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("services %v, want %v", names, tc.want)
			}
		})
	}
}

// imageRef is Docker's grammar of a local image reference: a lower-case
// repository, then an optional tag.
var imageRef = regexp.MustCompile(`^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`)

func TestComposeVariantSwitch(t *testing.T) {
	for _, v := range []string{"A", "B", "C"} {
		t.Run(v, func(t *testing.T) {
			p := loadCompose(t, map[string]string{"VARIANT": v}, "*")
			for _, s := range []string{"api", "worker", "worker-cpu"} {
				if got := env(p.Services[s], "VARIANT"); got != v {
					t.Errorf("%s VARIANT = %q, want %q", s, got, v)
				}
			}
			w := p.Services["worker"]
			if got := w.Build.Args["VARIANT"]; got == nil || *got != v {
				t.Errorf("worker build arg VARIANT = %v, want %s", got, v)
			}
			cpu := p.Services["worker-cpu"]
			for _, tc := range []struct{ service, image, got string }{
				{"worker", "genq-worker:" + v, w.Image},
				{"worker-cpu", "genq-worker-cpu:" + v, cpu.Image},
				{"genqctl", "genq-worker-cpu:" + v, p.Services["genqctl"].Image},
			} {
				// Docker refuses upper case in a repository name, not in a tag.
				if tc.got != tc.image || !imageRef.MatchString(tc.got) {
					t.Errorf("%s image %q, want %q", tc.service, tc.got, tc.image)
				}
			}
			if cpu.Build == nil || cpu.Build.Target != "runtime-cpu" {
				t.Errorf("worker-cpu build %+v: want Dockerfile.worker's runtime-cpu target", cpu.Build)
			}
			if got := cpu.Build.Args["VARIANT"]; got == nil || *got != v {
				t.Errorf("worker-cpu build arg VARIANT = %v, want %s", got, v)
			}
		})
	}
	p := loadCompose(t, map[string]string{}, "*")
	if got := env(p.Services["api"], "VARIANT"); got != "B" {
		t.Errorf("default VARIANT = %q, want B", got)
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
}

func parseDockerfile(t *testing.T, name string) []instruction {
	t.Helper()
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() != 0 {
		t.Fatalf("%s ends inside a continued instruction", name)
	}
	return out
}

// stages are the FROM images in order, global ARG defaults substituted.
func stages(ins []instruction) []string {
	args := map[string]string{}
	var froms []string
	seenFrom := false
	for _, in := range ins {
		switch in.cmd {
		case "ARG":
			if k, v, ok := strings.Cut(in.args, "="); ok && !seenFrom {
				args[k] = strings.Trim(v, `"`)
			}
		case "FROM":
			seenFrom = true
			image := strings.Fields(in.args)[0]
			froms = append(froms, regexp.MustCompile(`\$\{(\w+)\}`).ReplaceAllStringFunc(image, func(m string) string {
				return args[m[2:len(m)-1]]
			}))
		}
	}
	return froms
}

func lastStage(ins []instruction) []instruction {
	for i := len(ins) - 1; i >= 0; i-- {
		if ins[i].cmd == "FROM" {
			return ins[i:]
		}
	}
	return nil
}

func find(ins []instruction, cmd, contains string) bool {
	for _, in := range ins {
		if in.cmd == cmd && strings.Contains(in.args, contains) {
			return true
		}
	}
	return false
}

func TestDockerfileAPI(t *testing.T) {
	ins := parseDockerfile(t, "Dockerfile.api")
	froms := stages(ins)
	if len(froms) < 2 || !strings.HasPrefix(froms[len(froms)-1], "gcr.io/distroless/static") {
		t.Errorf("stages %v: want a multi-stage build ending on distroless static", froms)
	}
	final := lastStage(ins)
	checkNonRoot(t, "Dockerfile.api", final)
	if !find(final, "EXPOSE", "80") || !find(final, "ENV", "PORT=80") {
		t.Errorf("Dockerfile.api final stage does not expose and listen on port 80")
	}
	if !find(ins, "RUN", "CGO_ENABLED=0 go build") {
		t.Errorf("Dockerfile.api does not build a static binary")
	}
}

func TestDockerfileWorker(t *testing.T) {
	ins := parseDockerfile(t, "Dockerfile.worker")
	froms := stages(ins)
	if len(froms) == 0 || froms[0] != "nvidia/cuda:12.1.1-devel-ubuntu22.04" {
		t.Fatalf("first stage %v, want nvidia/cuda:12.1.1-devel-ubuntu22.04 (seed rule 7)", froms)
	}
	if last := froms[len(froms)-1]; !regexp.MustCompile(`^nvidia/cuda:12\.[0-9.]+-(cudnn[0-9]*-)?runtime-ubuntu22\.04$`).MatchString(last) {
		t.Errorf("final stage %q is not a CUDA runtime image", last)
	}
	final := lastStage(ins)
	checkNonRoot(t, "Dockerfile.worker", final)
	if !find(ins, "ARG", "VARIANT") || !find(final, "ENV", "VARIANT=${VARIANT}") {
		t.Errorf("the variant is not a build argument carried into the image")
	}
	for _, want := range []struct{ cmd, text string }{
		{"ENV", "CGO_ENABLED=1"},
		{"ENV", "-march=${MARCH}"},
		{"RUN", "scripts/build-llama.sh --flavour cuda"},
		{"RUN", "onnxruntime-linux-x64-gpu"},
		{"ARG", "ORT_GPU_URL"},
		{"RUN", "--mount=type=secret,id=hf_token"},
		{"RUN", "/out/genqctl download --variant"},
		{"ENV", "MODEL_DIR=/models"},
		{"ENV", "LLAMA_LIB_DIR=/opt/genq/lib/llama"},
	} {
		if !find(ins, want.cmd, want.text) {
			t.Errorf("Dockerfile.worker has no %s with %q", want.cmd, want.text)
		}
	}
	// yzma reaches libllama through libffi, which the CUDA runtime image
	// need not carry.
	if !find(final, "RUN", "libffi8") || !find(final, "ENV", "LLAMA_LIB_DIR=/opt/genq/lib/llama") {
		t.Error("the runtime stage does not install libffi8 and set LLAMA_LIB_DIR")
	}
	// The token travels only as a secret mount, never as an argument or
	// variable that would stay in the image's history.
	for _, in := range ins {
		up := strings.ToUpper(in.args)
		if (in.cmd == "ARG" || in.cmd == "ENV" || in.cmd == "LABEL") && (strings.Contains(up, "TOKEN") || strings.Contains(up, "HF_")) {
			t.Errorf("%s %s may carry the hub token into the image", in.cmd, in.args)
		}
		if in.cmd == "RUN" && strings.Contains(in.args, "genqctl download") && !strings.Contains(in.args, "--mount=type=secret,id=hf_token") {
			t.Errorf("a download runs without the secret mount: %s", in.args)
		}
	}
}

func checkNonRoot(t *testing.T, name string, final []instruction) {
	t.Helper()
	user := ""
	for _, in := range final {
		if in.cmd == "USER" {
			user = in.args
		}
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("%s final stage runs as %q, want a non-root user", name, user)
	}
}

func TestDockerignoreKeepsModelsOut(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	for _, want := range []string{"models", "bin", "lib", ".git"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix("deploy/docker/worker-entrypoint.sh", l) && !strings.HasPrefix(l, "#") {
			t.Errorf(".dockerignore line %q excludes the worker's entrypoint", l)
		}
	}
}

func TestNATSChartValues(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "deploy", "nats", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Config struct {
			Cluster struct {
				Enabled   bool `json:"enabled"`
				Replicas  int  `json:"replicas"`
				RouteURLs struct {
					UseFQDN bool `json:"useFQDN"`
				} `json:"routeURLs"`
			} `json:"cluster"`
			JetStream struct {
				Enabled   bool `json:"enabled"`
				FileStore struct {
					Enabled bool `json:"enabled"`
				} `json:"fileStore"`
			} `json:"jetstream"`
			Monitor struct {
				Enabled bool `json:"enabled"`
				Port    int  `json:"port"`
			} `json:"monitor"`
		} `json:"config"`
		Service struct {
			Ports struct {
				Monitor struct {
					Enabled bool `json:"enabled"`
				} `json:"monitor"`
			} `json:"ports"`
		} `json:"service"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	c := v.Config
	if !c.Cluster.Enabled || c.Cluster.Replicas != 3 || !c.Cluster.RouteURLs.UseFQDN {
		t.Errorf("cluster %+v: want 3 replicas with FQDN routes", c.Cluster)
	}
	if !c.JetStream.Enabled || !c.JetStream.FileStore.Enabled {
		t.Errorf("jetstream %+v: want file storage", c.JetStream)
	}
	if !c.Monitor.Enabled || c.Monitor.Port != 8222 || !v.Service.Ports.Monitor.Enabled {
		t.Errorf("monitoring %+v, service monitor port %v: want 8222 reachable", c.Monitor, v.Service.Ports.Monitor.Enabled)
	}
}

// stage is the instructions of the stage named name, FROM first.
func stage(ins []instruction, name string) []instruction {
	for i, in := range ins {
		if in.cmd != "FROM" || !strings.HasSuffix(in.args, " AS "+name) {
			continue
		}
		end := i + 1
		for end < len(ins) && ins[end].cmd != "FROM" {
			end++
		}
		return ins[i:end]
	}
	return nil
}

func TestDockerfileWorkerCPU(t *testing.T) {
	ins := parseDockerfile(t, "Dockerfile.worker")
	froms := map[string]string{} // a stage's name to its base image
	images := stages(ins)
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			froms[f[len(f)-1]], images = images[0], images[1:]
		}
	}
	for name, want := range map[string]string{"build-cpu": "golang:", "models-cpu": "build-cpu", "runtime-cpu": "debian:"} {
		st := stage(ins, name)
		if st == nil {
			t.Errorf("Dockerfile.worker has no %s stage", name)
			continue
		}
		if !strings.HasPrefix(froms[name], want) {
			t.Errorf("stage %s starts from %q, want %s…", name, froms[name], want)
		}
		for _, in := range st {
			if l := strings.ToLower(in.args); strings.Contains(l, "cuda") {
				t.Errorf("CPU stage %s builds or names CUDA: %s %s", name, in.cmd, in.args)
			}
		}
	}
	if !find(stage(ins, "build-cpu"), "RUN", "scripts/build-llama.sh --flavour cpu-portable") {
		t.Error("the CPU target does not build llama.cpp's portable CPU flavour")
	}
	rt := stage(ins, "runtime-cpu")
	checkNonRoot(t, "Dockerfile.worker runtime-cpu", rt)
	for _, want := range []struct{ cmd, text string }{
		{"ENV", "VARIANT=${VARIANT}"},
		{"ENV", "TEXT_GPU=false"},
		{"ENV", "LLAMA_LIB_DIR=/opt/genq/lib/llama"},
		{"RUN", "libffi8"},
		{"HEALTHCHECK", "healthcheck"},
	} {
		if !find(rt, want.cmd, want.text) {
			t.Errorf("runtime-cpu has no %s with %q", want.cmd, want.text)
		}
	}
	if !find(stage(ins, "models-cpu"), "RUN", "--mount=type=secret,id=hf_token") {
		t.Error("the CPU target's download runs without the secret mount")
	}
	if !find(parseDockerfile(t, "Dockerfile.api"), "HEALTHCHECK", "healthcheck") {
		t.Error("Dockerfile.api has no HEALTHCHECK")
	}
}

// The models profile: one CPU worker serves the example catalogue (two
// chat models and an embedding model), which the api reads too, its paths
// inside models/catalog on the host and /models/catalog in the containers.
func TestComposeModels(t *testing.T) {
	p := loadCompose(t, map[string]string{"MODELS_FILE": "/etc/genq/models.json"}, "models", "cpu")
	api, w := p.Services["api"], p.Services["worker-models"]
	if env(api, "MODELS_FILE") != "/etc/genq/models.json" || env(w, "MODELS_FILE") != "/etc/genq/models.json" || env(w, "TEXT_GPU") != "false" {
		t.Errorf("MODELS_FILE: api %q, worker %q", env(api, "MODELS_FILE"), env(w, "MODELS_FILE"))
	}
	mounts := map[string]string{}
	for _, v := range w.Volumes {
		mounts[v.Target] = v.Source
	}
	abs, _ := filepath.Abs(root)
	if mounts["/etc/genq/models.json"] != filepath.Join(abs, "deploy/compose/models.json") || mounts["/models/catalog"] != filepath.Join(abs, "models/catalog") {
		t.Errorf("worker-models mounts %v", mounts)
	}
	// Its image carries no model of its own (the catalogue's are mounted),
	// under a name of its own, so that it never replaces the cpu profile's.
	if w.Build == nil || w.Build.Args["MODEL_SOURCE"] == nil || *w.Build.Args["MODEL_SOURCE"] != "none" || w.Image == p.Services["worker-cpu"].Image {
		t.Errorf("worker-models builds %+v as %s", w.Build, w.Image)
	}
	spec, err := catalog.ReadFile(filepath.Join(root, "deploy/compose/models.json"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[genq.ModelKind]int{}
	for _, m := range spec.Models {
		kinds[m.Kind]++
		if m.Hub == nil || !strings.HasPrefix(filepath.Clean(m.Path), filepath.Join(root, "models/catalog")) {
			t.Errorf("model %s: path %s, hub %v; want a file under models/catalog that genqctl download fetches", m.Name, m.Path, m.Hub)
		}
	}
	if kinds[genq.KindChat] != 2 || kinds[genq.KindEmbedding] != 1 {
		t.Errorf("kinds %v; want two chat models and an embedding model", kinds)
	}
	if _, err := catalog.FromSpec(spec, genq.VariantB); err != nil {
		t.Error(err)
	}
}
