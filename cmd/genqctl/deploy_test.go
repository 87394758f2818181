package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/genq/genq/internal/deploy"
)

func runCmd(t *testing.T, getenv map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := env{getenv: func(k string) string { return getenv[k] }, stdin: strings.NewReader(""), stdout: &out, stderr: &errb}
	err := run(t.Context(), args, e)
	if err != nil {
		code = exitCode(err)
		errb.WriteString(err.Error())
	}
	return out.String(), errb.String(), code
}

func TestDeployFlagValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"three GPUs", []string{"--gpus", "3", "--gpu-type", "a10g"}, "--gpus 3: want 1, 2, 4 or 8"},
		{"z80", []string{"--gpus", "1", "--gpu-type", "z80"}, `unknown GPU type "z80": want one of a10g, a100, h100, l4, l40s, t4`},
		{"both bad", []string{"--gpus", "3", "--gpu-type", "z80"}, "--gpus 3"},
		{"nothing", nil, "--gpus and --gpu-type required"},
		{"no type", []string{"--gpus", "1"}, "--gpu-type required"},
		{"not a number", []string{"--gpus", "one", "--gpu-type", "a10g"}, `invalid value "one" for flag -gpus`},
		{"variant", []string{"--gpus", "1", "--gpu-type", "a10g", "--variant", "D"}, `unknown variant "D"`},
		{"name", []string{"--gpus", "1", "--gpu-type", "a10g", "--name", "My_App"}, `--name "My_App"`},
		{"namespace", []string{"--gpus", "1", "--gpu-type", "a10g", "--namespace", "UPPER"}, `--namespace "UPPER"`},
		{"service type", []string{"--gpus", "1", "--gpu-type", "a10g", "--service-type", "Ingress"}, "--service-type"},
		{"extra argument", []string{"--gpus", "1", "--gpu-type", "a10g", "now"}, `unexpected argument "now"`},
		{"nats replicas", []string{"--gpus", "1", "--gpu-type", "a10g", "--nats-replicas", "7"}, "--nats-replicas 7: JetStream allows 1 to 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runCmd(t, nil, append([]string{"deploy", "--dry-run"}, tc.args...)...)
			if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
				t.Fatalf("exit %d, stderr %q, stdout %d bytes; want exit 2, %q and no output", code, errOut, len(out), tc.want)
			}
		})
	}
}

func TestDeployDryRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{
			[]string{"--gpus", "1", "--gpu-type", "a10g", "--variant", "B"},
			[]string{`nvidia.com/gpu: "1"`, "- NVIDIA-A10G", "genq.dev/gpu-type: a10g", "kind: ScaledObject", "minReplicaCount: 0",
				"type: nats-jetstream", "consumer: genq-worker-B", "stream: GENQ_JOBS", "path: /readiness", "image: genq/genq-worker-b:latest"},
			[]string{"A100", "HF_TOKEN: "},
		},
		{
			[]string{"--gpus", "1", "--gpu-type", "a100", "--variant", "A"},
			[]string{"- NVIDIA-A100-SXM4-80GB", "genq.dev/gpu-type: a100", "consumer: genq-worker-A", "minReplicaCount: 0", "path: /readiness"},
			[]string{"A10G"},
		},
		{
			[]string{"--gpus", "2", "--gpu-type", "L4", "--variant", "c", "--name", "img", "--namespace", "art", "--registry", "r.example/team", "--tag", "v1"},
			[]string{`nvidia.com/gpu: "2"`, "- NVIDIA-L4", "name: img-worker", "namespace: art", "image: r.example/team/genq-worker-c:v1", "image: r.example/team/genq-api:v1"},
			nil,
		},
		{
			[]string{"--gpus", "1", "--gpu-type", "a10g", "--gpu-label", "karpenter.k8s.aws/instance-gpu-name", "--gpu-label-value", "a10g"},
			[]string{"key: karpenter.k8s.aws/instance-gpu-name", "- a10g"},
			[]string{"NVIDIA-A10G"},
		},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// A token in the environment must never reach printed YAML.
			out, errOut, code := runCmd(t, map[string]string{"HF_TOKEN": "hf_secretvalue"}, append([]string{"deploy", "--dry-run"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range append(tc.want, "kind: Deployment", "kind: Service", "kind: HorizontalPodAutoscaler", "kind: PodDisruptionBudget", "kind: Secret") {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			// No Secret is printed with values: no data at all.
			for _, n := range append(tc.not, "hf_secretvalue", "aGZfc2VjcmV0dmFsdWU", "\ndata:", "stringData") {
				if strings.Contains(out, n) {
					t.Errorf("output contains %q", n)
				}
			}
		})
	}
}

// apiServer stands in for a kube-apiserver (none can be run here; see
// docs/deploy.md): it keeps what is applied, and answers reads with the
// api Deployment available and the Service given a load-balancer address,
// as the controllers and the cloud would.
type apiServer struct {
	scalerReady, scalerMessage string // KEDA's Ready condition of the ScaledObject

	mu      sync.Mutex
	objects map[string]map[string]any // by URL path
	order   []string
}

func newAPIServer(t *testing.T) (*apiServer, *httptest.Server) {
	s := &apiServer{objects: map[string]map[string]any{}, scalerReady: "True", scalerMessage: "ScaledObject is defined correctly and is ready for scaling"}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	old := connectCluster
	connectCluster = func(kubeconfig, context string) (*deploy.Cluster, error) {
		return deploy.NewCluster(&rest.Config{Host: srv.URL}, "test-ctx")
	}
	t.Cleanup(func() { connectCluster = old })
	return s, srv
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method {
	case http.MethodPatch:
		b, _ := io.ReadAll(r.Body)
		var obj map[string]any
		_ = json.Unmarshal(b, &obj)
		if _, ok := s.objects[r.URL.Path]; !ok {
			s.order = append(s.order, r.URL.Path)
		}
		s.objects[r.URL.Path] = obj
		_, _ = w.Write(b)
	case http.MethodGet:
		if r.URL.Path == "/apis/apps/v1/deployments" {
			var items []any
			for _, p := range s.order {
				if o := s.objects[p]; o["kind"] == "Deployment" && strings.HasSuffix(p, "-worker") {
					items = append(items, o)
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "apps/v1", "kind": "DeploymentList", "items": items})
			return
		}
		obj, ok := s.objects[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		switch obj["kind"] {
		case "Deployment":
			obj["status"] = map[string]any{"updatedReplicas": 2, "availableReplicas": 2, "readyReplicas": 0}
		case "Service":
			obj["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": "203.0.113.7"}}}}
		case "ScaledObject":
			obj["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": s.scalerReady, "message": s.scalerMessage}}}
		}
		_ = json.NewEncoder(w).Encode(obj)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func TestDeployAppliesAndPrintsURL(t *testing.T) {
	for _, tc := range []struct {
		name       string
		token      string
		wantSecret bool
	}{
		{"with token", "hf_abc", true},
		{"without token", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newAPIServer(t)
			out, errOut, code := runCmd(t, map[string]string{"HF_TOKEN": tc.token}, "deploy", "--gpus", "1", "--gpu-type", "a10g", "--variant", "B", "--wait", "10s")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(out, "genq-b is ready: http://203.0.113.7") {
				t.Errorf("output lacks the URL:\n%s", out)
			}
			secretPath := "/api/v1/namespaces/genq/secrets/genq-b-hub-token"
			secret, applied := s.objects[secretPath]
			if applied != tc.wantSecret {
				t.Fatalf("Secret applied = %v, want %v", applied, tc.wantSecret)
			}
			if applied {
				data, _ := secret["data"].(map[string]any)
				if data["HF_TOKEN"] != "aGZfYWJj" { // base64 of hf_abc
					t.Errorf("Secret data %v, want HF_TOKEN of the environment's token", data)
				}
			} else if !strings.Contains(errOut, "left as it is") {
				t.Errorf("stderr %q does not say the Secret is left alone", errOut)
			}
			if strings.Contains(errOut, "warning") {
				t.Errorf("a warning with KEDA ready: %s", errOut)
			}
			if strings.Contains(out+errOut, "hf_abc") {
				t.Errorf("the token was printed")
			}
			last := s.order[len(s.order)-1]
			if !strings.HasSuffix(last, "/scaledobjects/genq-b-worker") {
				t.Errorf("last object applied %s, want the ScaledObject", last)
			}
		})
	}
}

func TestListDeployments(t *testing.T) {
	newAPIServer(t)
	for _, v := range [][]string{{"--gpu-type", "a100", "--variant", "A"}, {"--gpu-type", "a10g", "--variant", "C", "--gpus", "2"}} {
		args := append([]string{"deploy", "--gpus", "1", "--wait", "0"}, v...)
		if _, errOut, code := runCmd(t, nil, args...); code != 0 {
			t.Fatalf("deploy: exit %d: %s", code, errOut)
		}
	}
	out, errOut, code := runCmd(t, nil, "list", "deployments")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := []string{
		"NAME    NAMESPACE  VARIANT  GPU      WORKERS  URL",
		"genq-a  genq       A        1x a100  0/0      http://203.0.113.7",
		"genq-c  genq       C        2x a10g  0/0      http://203.0.113.7",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("list output:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
}

func TestListErrors(t *testing.T) {
	dead := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, dead, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: prod, context: {cluster: c, user: u}}]
current-context: prod
`)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"no resource", []string{"list"}, 2, "usage: genqctl list deployments"},
		{"other resource", []string{"list", "pods"}, 2, "usage: genqctl list deployments"},
		{"unreachable", []string{"list", "deployments", "--kubeconfig", dead}, 1, `cannot reach the Kubernetes API server https://127.0.0.1:1 (context "prod")`},
		{"missing kubeconfig", []string{"list", "deployments", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, 1, "read the kube configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCmd(t, nil, tc.args...)
			if code != tc.wantCode || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, tc.wantCode, tc.want)
			}
		})
	}
}

func TestDeployWithoutClusterFails(t *testing.T) {
	old := connectCluster
	connectCluster = func(string, string) (*deploy.Cluster, error) { return nil, deploy.ErrNoCluster }
	t.Cleanup(func() { connectCluster = old })
	_, errOut, code := runCmd(t, nil, "deploy", "--gpus", "1", "--gpu-type", "a10g")
	if code != 1 || !strings.Contains(errOut, "no Kubernetes cluster is configured") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func writeKubeconfig(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDeployWarnsWhenKEDACannotScale(t *testing.T) {
	s, _ := newAPIServer(t)
	s.scalerReady, s.scalerMessage = "False", "error getting metrics: consumer genq-worker-B not found"
	out, errOut, code := runCmd(t, nil, "deploy", "--gpus", "1", "--gpu-type", "a10g", "--wait", "10s")
	if code != 0 || !strings.Contains(out, "is ready: http://203.0.113.7") {
		t.Fatalf("exit %d, stdout %q: the api is up, deploy should succeed", code, out)
	}
	if !strings.Contains(errOut, "warning: KEDA's ScaledObject genq-b-worker is not ready: error getting metrics: consumer genq-worker-B not found") {
		t.Fatalf("stderr %q lacks KEDA's reason", errOut)
	}
}

// TestDeployCredentials: a first deploy creates random NATS passwords (in
// NATS's namespace, and the api's and workers' copies in the deployment's)
// and a random api key, prints how to read the key but never a secret, and
// a redeploy keeps them all.
func TestDeployCredentials(t *testing.T) {
	s, _ := newAPIServer(t)
	secretData := func(path string) map[string]string {
		t.Helper()
		obj, ok := s.objects[path]
		if !ok {
			t.Fatalf("%s was not applied", path)
		}
		data, _ := obj["data"].(map[string]any)
		out := map[string]string{}
		for k, v := range data {
			b, err := base64.StdEncoding.DecodeString(v.(string))
			if err != nil || len(b) < 32 {
				t.Fatalf("%s key %s: %q (%v), want a random value of 32 characters", path, k, b, err)
			}
			out[k] = string(b)
		}
		return out
	}
	const (
		usersPath = "/api/v1/namespaces/nats/secrets/genq-nats-users"
		natsPath  = "/api/v1/namespaces/genq/secrets/genq-b-nats"
		keyPath   = "/api/v1/namespaces/genq/secrets/genq-b-api-key"
	)
	deployOnce := func() (out, errOut string) {
		t.Helper()
		out, errOut, code := runCmd(t, nil, "deploy", "--gpus", "1", "--gpu-type", "a10g", "--variant", "B", "--wait", "10s")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		return out, errOut
	}
	out, errOut := deployOnce()
	users, copied, key := secretData(usersPath), secretData(natsPath), secretData(keyPath)
	if len(users) != 3 || users["GENQ_NATS_API_PASSWORD"] == users["GENQ_NATS_WORKER_PASSWORD"] {
		t.Errorf("NATS users' Secret has %d keys, want 3 different passwords", len(users))
	}
	if len(copied) != 2 || copied["GENQ_NATS_API_PASSWORD"] != users["GENQ_NATS_API_PASSWORD"] || copied["GENQ_NATS_WORKER_PASSWORD"] != users["GENQ_NATS_WORKER_PASSWORD"] {
		t.Errorf("the deployment's NATS Secret is not the api's and workers' passwords, and only those")
	}
	if len(key) != 1 || key["API_KEYS"] == "" {
		t.Errorf("api key Secret keys %d, want API_KEYS", len(key))
	}
	for _, v := range append(slices.Collect(maps.Values(users)), key["API_KEYS"]) {
		if strings.Contains(out+errOut, v) {
			t.Errorf("a secret was printed:\n%s\n%s", out, errOut)
		}
	}
	for _, want := range []string{"kubectl -n genq get secret genq-b-api-key -o jsonpath='{.data.API_KEYS}' | base64 -d",
		`curl -s -X POST http://203.0.113.7/generate -H "Authorization: Bearer $KEY"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "rollout restart statefulset/nats") {
		t.Errorf("stderr does not say to restart NATS after creating its passwords: %s", errOut)
	}

	_, errOut = deployOnce()
	if again := secretData(keyPath); again["API_KEYS"] != key["API_KEYS"] {
		t.Error("a redeploy changed the api key")
	}
	if again := secretData(natsPath); !maps.Equal(again, copied) {
		t.Error("a redeploy changed the NATS passwords")
	}
	if strings.Contains(errOut, "rollout restart") {
		t.Errorf("a redeploy asks for a NATS restart: %s", errOut)
	}
}
