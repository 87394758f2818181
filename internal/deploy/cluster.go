package deploy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster applies and reads genq's objects through client-go's dynamic
// client: one client for core kinds and KEDA's CRD alike, without the
// compile weight of the typed clientset, which carries every API group.
type Cluster struct {
	Client dynamic.Interface
	// Server and Context say which cluster, for messages.
	Server, Context string
}

// ErrNoCluster is returned when no kube configuration is found at all.
var ErrNoCluster = errors.New("no Kubernetes cluster is configured")

// Connect opens the cluster of the current kube context (or of context),
// read from kubeconfig, $KUBECONFIG or ~/.kube/config, or the in-cluster
// service account when none of those exist.
func Connect(kubeconfig, context string) (*Cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			return nil, fmt.Errorf("%w: set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config (for example with your cloud's \"get credentials\" command)", ErrNoCluster)
		}
		return nil, fmt.Errorf("read the kube configuration: %w", err)
	}
	raw, err := cc.RawConfig()
	if err == nil && context == "" {
		context = raw.CurrentContext
	}
	// A dead API server should fail a command in seconds, not hang it.
	cfg.Timeout = 20 * time.Second
	return NewCluster(cfg, context)
}

// NewCluster wraps a REST configuration.
func NewCluster(cfg *rest.Config, context string) (*Cluster, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return &Cluster{Client: client, Server: cfg.Host, Context: context}, nil
}

// unreachable names the cluster in an error that means no answer came.
func (c *Cluster) unreachable(err error) error {
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		return err
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return fmt.Errorf("cannot reach the Kubernetes API server %s (context %q); check that the cluster is up and your kube context: %w", c.Server, c.Context, err)
}

func (c *Cluster) resource(o Object) dynamic.ResourceInterface {
	r := c.Client.Resource(o.Resource)
	if o.Namespaced {
		return r.Namespace(o.Manifest.GetNamespace())
	}
	return r
}

// Apply server-side applies the objects in order, as field manager
// genqctl. Force takes over fields another manager set by hand (kubectl
// edit), so that a deploy always leaves what it rendered.
func (c *Cluster) Apply(ctx context.Context, objs []Object, applied func(Object)) error {
	for _, o := range objs {
		manifest, err := c.keepWorkerCount(ctx, o)
		if err != nil {
			return fmt.Errorf("apply %s: %w", o.Name(), err)
		}
		_, err = c.resource(o).Apply(ctx, o.Manifest.GetName(), manifest, metav1.ApplyOptions{FieldManager: ManagedBy, Force: true})
		if err != nil {
			if o.Resource == resScaledObject && apierrors.IsNotFound(err) {
				return fmt.Errorf("apply %s: the cluster does not know ScaledObject; install KEDA first (docs/deploy.md): %w", o.Name(), err)
			}
			return fmt.Errorf("apply %s: %w", o.Name(), c.unreachable(err))
		}
		if applied != nil {
			applied(o)
		}
	}
	return nil
}

// keepWorkerCount returns the manifest to apply. The worker Deployment is
// rendered with replicas 0, right for its creation; once it exists KEDA owns
// the count, and a redeploy that forced 0 would stop busy workers. So an
// existing worker's current count is applied instead: a no-op for that field.
func (c *Cluster) keepWorkerCount(ctx context.Context, o Object) (*unstructured.Unstructured, error) {
	if c := o.Manifest.GetLabels()[LabelComponent]; o.Resource != resDeployment || c != "worker" && c != "model-worker" {
		return o.Manifest, nil
	}
	live, err := c.resource(o).Get(ctx, o.Manifest.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return o.Manifest, nil
	}
	if err != nil {
		return nil, c.unreachable(err)
	}
	var d appsv1.Deployment
	if err := fromUnstructured(live, &d); err != nil || d.Spec.Replicas == nil {
		return o.Manifest, nil
	}
	n := int64(*d.Spec.Replicas)
	m := o.Manifest.DeepCopy()
	if err := unstructured.SetNestedField(m.Object, n, "spec", "replicas"); err != nil {
		return nil, err
	}
	return m, nil
}

// WaitReady waits until the api answers behind its Service and returns the
// deployment's URL. Workers are not waited for: at zero jobs there are none,
// by design, and the first request or GET /readiness starts one.
func (c *Cluster) WaitReady(ctx context.Context, o Options, every time.Duration) (string, error) {
	var last error
	for {
		url, err := c.readyURL(ctx, o)
		if err == nil {
			return url, nil
		}
		last = err
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s in namespace %s is not ready: %w", o.Name, o.Namespace, last)
		case <-time.After(every):
		}
	}
}

var errNotReady = errors.New("not ready")

func (c *Cluster) readyURL(ctx context.Context, o Options) (string, error) {
	var d appsv1.Deployment
	if err := c.get(ctx, resDeployment, o.Namespace, o.apiName(), &d); err != nil {
		return "", err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < 1 {
		return "", fmt.Errorf("%w: api Deployment has %d of %d replicas updated and %d available", errNotReady, d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas)
	}
	var svc corev1.Service
	if err := c.get(ctx, resService, o.Namespace, o.Name, &svc); err != nil {
		return "", err
	}
	url := ServiceURL(&svc)
	if url == "" {
		return "", fmt.Errorf("%w: Service %s has no load-balancer address yet", errNotReady, o.Name)
	}
	return url, nil
}

func (c *Cluster) get(ctx context.Context, res schema.GroupVersionResource, ns, name string, into any) error {
	u, err := c.Client.Resource(res).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return c.unreachable(err)
	}
	return fromUnstructured(u, into)
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("decode %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// ScalerStatus reports KEDA's Ready condition of the worker's ScaledObject:
// false with KEDA's message when the trigger cannot read NATS (a wrong
// monitoring endpoint, a missing consumer), which would leave the workers at
// zero whatever the queue holds. ok is false too while KEDA has not looked.
func (c *Cluster) ScalerStatus(ctx context.Context, o Options) (ok bool, msg string, err error) {
	u, err := c.Client.Resource(resScaledObject).Namespace(o.Namespace).Get(ctx, o.workerName(), metav1.GetOptions{})
	if err != nil {
		return false, "", c.unreachable(err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Ready" {
			m, _ := cond["message"].(string)
			return cond["status"] == "True", m, nil
		}
	}
	return false, "KEDA has not reported on it yet", nil
}

// ServiceURL is where the api answers: the load balancer's address, or the
// in-cluster name of a ClusterIP Service. Empty while a load balancer has
// no address yet.
func ServiceURL(svc *corev1.Service) string {
	port := ""
	if ps := svc.Spec.Ports; len(ps) > 0 && ps[0].Port != 80 {
		port = ":" + strconv.Itoa(int(ps[0].Port))
	}
	switch svc.Spec.Type {
	case corev1.ServiceTypeLoadBalancer:
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.Hostname != "" {
				return "http://" + in.Hostname + port
			}
			if in.IP != "" {
				return "http://" + in.IP + port
			}
		}
		return ""
	case corev1.ServiceTypeNodePort:
		if len(svc.Spec.Ports) > 0 {
			return "http://<node>:" + strconv.Itoa(int(svc.Spec.Ports[0].NodePort))
		}
		return ""
	}
	return "http://" + svc.Name + "." + svc.Namespace + ".svc.cluster.local" + port
}

// Deployment is one genq deployment as list shows it.
type Deployment struct {
	Name, Namespace string
	Variant         string
	GPUType         string
	GPUs            int
	WorkersReady    int32
	WorkersDesired  int32 // 0 while KEDA has scaled the workers to zero
	URL             string
}

// List finds the deployments genqctl made, in namespace or in all of them
// when namespace is empty, sorted by namespace and name.
func (c *Cluster) List(ctx context.Context, namespace string) ([]Deployment, error) {
	sel := labels.SelectorFromSet(labels.Set{LabelPartOf: "genq", LabelManagedBy: ManagedBy, LabelComponent: "worker"})
	ul, err := c.Client.Resource(resDeployment).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, c.unreachable(err)
	}
	var out []Deployment
	for i := range ul.Items {
		var d appsv1.Deployment
		if err := fromUnstructured(&ul.Items[i], &d); err != nil {
			return nil, err
		}
		l := d.Labels
		gpus, _ := strconv.Atoi(l[LabelGPUs])
		dep := Deployment{
			Name: l[LabelInstance], Namespace: d.Namespace, Variant: l[LabelVariant], GPUType: l[LabelGPUType], GPUs: gpus,
			WorkersReady: d.Status.ReadyReplicas,
		}
		if d.Spec.Replicas != nil {
			dep.WorkersDesired = *d.Spec.Replicas
		}
		var svc corev1.Service
		switch err := c.get(ctx, resService, d.Namespace, dep.Name, &svc); {
		case apierrors.IsNotFound(err):
			dep.URL = "(no Service)"
		case err != nil:
			return nil, err
		default:
			dep.URL = ServiceURL(&svc)
			if dep.URL == "" {
				dep.URL = "(pending)"
			}
		}
		out = append(out, dep)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}
