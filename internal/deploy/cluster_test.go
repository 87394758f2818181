package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/genq/genq/internal/genq"
)

// No real kube-apiserver can be had here (see docs/deploy.md, "Tests"), so
// these tests use two stand-ins, and say so: an HTTP server that records
// what client-go puts on the wire, and client-go's fake dynamic client.

// applyRecorder is an HTTP server that takes server-side apply requests and
// answers each with the object it was sent.
type applyRecorder struct {
	noKEDA bool // answer 404 for ScaledObjects, as a cluster without KEDA does
	mu     sync.Mutex
	reqs   []recordedApply
}

type recordedApply struct {
	method, path, contentType, fieldManager, force string
	body                                           map[string]any
}

func (r *applyRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	var body map[string]any
	_ = json.Unmarshal(b, &body)
	r.mu.Lock()
	r.reqs = append(r.reqs, recordedApply{req.Method, req.URL.Path, req.Header.Get("Content-Type"),
		req.URL.Query().Get("fieldManager"), req.URL.Query().Get("force"), body})
	r.mu.Unlock()
	if req.Method == http.MethodGet { // nothing exists yet
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
		return
	}
	if r.noKEDA && strings.Contains(req.URL.Path, "/scaledobjects/") {
		http.NotFound(w, req)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func TestApplyIsServerSideApplyOnTheWire(t *testing.T) {
	rec := &applyRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	c, err := NewCluster(&rest.Config{Host: srv.URL}, "test")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(goldenOptions(genq.VariantB))
	if err != nil {
		t.Fatal(err)
	}
	var applied []string
	if err := c.Apply(t.Context(), objs, func(o Object) { applied = append(applied, o.Name()) }); err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{
		"/api/v1/namespaces/genq",
		"/api/v1/namespaces/genq/secrets/genq-b-hub-token",
		"/api/v1/namespaces/genq/secrets/genq-b-nats",
		"/api/v1/namespaces/genq/secrets/genq-b-api-key",
		"/apis/apps/v1/namespaces/genq/deployments/genq-b-api",
		"/api/v1/namespaces/genq/services/genq-b",
		"/api/v1/namespaces/genq/services/genq-b-internal",
		"/apis/autoscaling/v2/namespaces/genq/horizontalpodautoscalers/genq-b-api",
		"/apis/policy/v1/namespaces/genq/poddisruptionbudgets/genq-b-api",
		"/apis/apps/v1/namespaces/genq/deployments/genq-b-worker",
		"/apis/keda.sh/v1alpha1/namespaces/genq/scaledobjects/genq-b-worker",
	}
	var patches []recordedApply
	for _, r := range rec.reqs {
		if r.method != http.MethodGet {
			patches = append(patches, r)
		}
	}
	if len(patches) != len(wantPaths) || len(applied) != len(wantPaths) {
		t.Fatalf("%d patches, %d reported applied; want %d", len(patches), len(applied), len(wantPaths))
	}
	for i, r := range patches {
		if r.method != http.MethodPatch || r.path != wantPaths[i] || r.contentType != string(types.ApplyPatchType) || r.fieldManager != ManagedBy || r.force != "true" {
			t.Errorf("request %d: %s %s (%s) fieldManager=%q force=%q; want PATCH %s (%s) fieldManager=%q force=true",
				i, r.method, r.path, r.contentType, r.fieldManager, r.force, wantPaths[i], types.ApplyPatchType, ManagedBy)
		}
	}
	so := patches[len(patches)-1].body
	if so["kind"] != "ScaledObject" || so["apiVersion"] != "keda.sh/v1alpha1" {
		t.Errorf("last apply sent %v %v, want the ScaledObject", so["apiVersion"], so["kind"])
	}
}

func TestApplyWithoutKEDASaysSo(t *testing.T) {
	srv := httptest.NewServer(&applyRecorder{noKEDA: true})
	defer srv.Close()
	c, _ := NewCluster(&rest.Config{Host: srv.URL}, "test")
	objs, _ := Render(goldenOptions(genq.VariantC))
	err := c.Apply(t.Context(), objs, nil)
	if err == nil || !strings.Contains(err.Error(), "install KEDA first") {
		t.Fatalf("err = %v, want a hint to install KEDA", err)
	}
}

func TestUnreachableClusterIsAClearError(t *testing.T) {
	// Port 1 on loopback refuses connections: an API server that is down.
	kubeconfig := filepath.Join(t.TempDir(), "config")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: dead, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: dead-ctx, context: {cluster: dead, user: u}}]
current-context: dead-ctx
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Connect(kubeconfig, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(t.Context(), "")
	if err == nil || !strings.Contains(err.Error(), `cannot reach the Kubernetes API server https://127.0.0.1:1 (context "dead-ctx")`) {
		t.Fatalf("err = %v, want it to name the unreachable server and context", err)
	}
}

func TestNoKubeconfigIsAClearError(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	_, err := Connect("", "")
	if !errors.Is(err, ErrNoCluster) || !strings.Contains(err.Error(), "KUBECONFIG") {
		t.Fatalf("err = %v, want ErrNoCluster with a hint", err)
	}
}

// fakeCluster is client-go's fake dynamic client, taught to answer
// server-side apply by creating or replacing the object: its own tracker
// only patches objects that already exist.
func fakeCluster(t *testing.T) (*Cluster, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	listKinds := map[schema.GroupVersionResource]string{
		resNamespace: "NamespaceList", resSecret: "SecretList", resService: "ServiceList", resDeployment: "DeploymentList",
		resHPA: "HorizontalPodAutoscalerList", resPDB: "PodDisruptionBudgetList", resScaledObject: "ScaledObjectList",
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds)
	client.PrependReactor("patch", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.PatchActionImpl)
		if p.GetPatchType() != types.ApplyPatchType {
			return false, nil, nil
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(p.GetPatch()); err != nil {
			return true, nil, err
		}
		tr := client.Tracker()
		_, err := tr.Get(p.GetResource(), p.GetNamespace(), p.GetName())
		switch {
		case apierrors.IsNotFound(err):
			err = tr.Create(p.GetResource(), u, p.GetNamespace())
		case err == nil:
			err = tr.Update(p.GetResource(), u, p.GetNamespace())
		}
		return true, u, err
	})
	return &Cluster{Client: client, Server: "fake", Context: "fake"}, client
}

// setStatus stands in for the controllers: the api's pods became available
// and the cloud gave its load balancer an address.
func setStatus(t *testing.T, client *dynamicfake.FakeDynamicClient, o Options, lbHost string) {
	t.Helper()
	ctx := context.Background()
	d, err := client.Resource(resDeployment).Namespace(o.Namespace).Get(ctx, o.Name+"-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(d.Object, int64(2), "status", "updatedReplicas")
	_ = unstructured.SetNestedField(d.Object, int64(2), "status", "availableReplicas")
	if _, err := client.Resource(resDeployment).Namespace(o.Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s, err := client.Resource(resService).Namespace(o.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(s.Object, []any{map[string]any{"hostname": lbHost}}, "status", "loadBalancer", "ingress")
	if _, err := client.Resource(resService).Namespace(o.Namespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestWaitReadyAndList(t *testing.T) {
	c, client := fakeCluster(t)
	oa, ob := goldenOptions(genq.VariantA), goldenOptions(genq.VariantB)
	for _, o := range []Options{oa, ob} {
		objs, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(t.Context(), objs, nil); err != nil {
			t.Fatal(err)
		}
	}

	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.WaitReady(short, ob, 10*time.Millisecond); err == nil || !strings.Contains(err.Error(), "0 available") {
		t.Fatalf("WaitReady before the pods are up: err = %v, want not ready with the reason", err)
	}

	setStatus(t, client, ob, "b.elb.example")
	url, err := c.WaitReady(t.Context(), ob, 10*time.Millisecond)
	if err != nil || url != "http://b.elb.example" {
		t.Fatalf("WaitReady = %q, %v; want http://b.elb.example", url, err)
	}

	// KEDA has scaled A's workers to 1, one of them ready.
	w, _ := client.Resource(resDeployment).Namespace("genq").Get(t.Context(), "genq-a-worker", metav1.GetOptions{})
	_ = unstructured.SetNestedField(w.Object, int64(1), "spec", "replicas")
	_ = unstructured.SetNestedField(w.Object, int64(1), "status", "readyReplicas")
	if _, err := client.Resource(resDeployment).Namespace("genq").Update(t.Context(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	got, err := c.List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Deployment{
		{Name: "genq-a", Namespace: "genq", Variant: "A", GPUType: "a100", GPUs: 1, WorkersReady: 1, WorkersDesired: 1, URL: "(pending)"},
		{Name: "genq-b", Namespace: "genq", Variant: "B", GPUType: "a10g", GPUs: 1, WorkersReady: 0, WorkersDesired: 0, URL: "http://b.elb.example"},
	}
	if len(got) != len(want) {
		t.Fatalf("List = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("List[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	if other, err := c.List(t.Context(), "elsewhere"); err != nil || len(other) != 0 {
		t.Errorf("List in another namespace = %+v, %v; want none", other, err)
	}
}

func TestServiceURL(t *testing.T) {
	lb := func(ing ...corev1.LoadBalancerIngress) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "genq-b", Namespace: "genq"},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
			Status:     corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: ing}},
		}
	}
	clusterIP := lb()
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	for _, tc := range []struct {
		name string
		svc  *corev1.Service
		want string
	}{
		{"pending", lb(), ""},
		{"hostname", lb(corev1.LoadBalancerIngress{Hostname: "x.elb.amazonaws.com"}), "http://x.elb.amazonaws.com"},
		{"ip", lb(corev1.LoadBalancerIngress{IP: "34.1.2.3"}), "http://34.1.2.3"},
		{"cluster ip", clusterIP, "http://genq-b.genq.svc.cluster.local"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ServiceURL(tc.svc); got != tc.want {
				t.Errorf("ServiceURL = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRedeployKeepsKEDAsWorkerCount(t *testing.T) {
	c, client := fakeCluster(t)
	o := goldenOptions(genq.VariantB)
	objs, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(t.Context(), objs, nil); err != nil {
		t.Fatal(err)
	}
	workers := client.Resource(resDeployment).Namespace("genq")
	w, err := workers.Get(t.Context(), "genq-b-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); n != 0 {
		t.Fatalf("new worker Deployment has %d replicas, want 0", n)
	}
	// KEDA scales up; then the same deployment is applied again.
	_ = unstructured.SetNestedField(w.Object, int64(3), "spec", "replicas")
	if _, err := workers.Update(t.Context(), w, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(t.Context(), objs, nil); err != nil {
		t.Fatal(err)
	}
	w, _ = workers.Get(t.Context(), "genq-b-worker", metav1.GetOptions{})
	if n, _, _ := unstructured.NestedInt64(w.Object, "spec", "replicas"); n != 3 {
		t.Fatalf("after a redeploy the workers are %d, want KEDA's 3", n)
	}
	if n, _, _ := unstructured.NestedInt64(objs[6].Manifest.Object, "spec", "replicas"); n != 0 {
		t.Fatalf("Apply changed the rendered manifest: replicas %d", n)
	}
}
