package deploy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NATS users and inbox prefixes of genq's roles (docs/protocol.md §9). The
// permissions that go with them are nats-server's: deploy/nats/values.yaml
// for Kubernetes, deploy/nats/genq-users.conf for compose.
const (
	NATSAPIUser    = "genq-api"
	NATSWorkerUser = "genq-worker"
	NATSBatchUser  = "genq-batch"

	APIInboxPrefix    = "_INBOX_api"
	WorkerInboxPrefix = "_INBOX_worker"
	BatchInboxPrefix  = "_INBOX_batch"
	// ReplyPrefixes are the producers' prefixes, the only subjects the
	// workers' user may publish replies to.
	ReplyPrefixes = APIInboxPrefix + "," + BatchInboxPrefix

	// NATSUsersSecret, in the NATS namespace, holds every role's password;
	// nats-server reads it as environment variables (values.yaml).
	NATSUsersSecret = "genq-nats-users"
	// Keys of the passwords, named like the variables nats-server reads.
	NATSAPIPasswordKey    = "GENQ_NATS_API_PASSWORD"
	NATSWorkerPasswordKey = "GENQ_NATS_WORKER_PASSWORD"
	NATSBatchPasswordKey  = "GENQ_NATS_BATCH_PASSWORD"

	// APIKeysKey is the key of the api's key Secret, named like the
	// variable the api reads.
	APIKeysKey = "API_KEYS"
)

// natsPasswordKeys are the keys of NATSUsersSecret.
func natsPasswordKeys() []string {
	return []string{NATSAPIPasswordKey, NATSWorkerPasswordKey, NATSBatchPasswordKey}
}

func (o Options) natsSecretName() string   { return o.Name + "-nats" }
func (o Options) apiKeySecretName() string { return o.Name + "-api-key" }

// NewSecretValue returns a random password or API key: 32 letters and
// digits, the first a letter. nats-server parses an environment variable
// it substitutes as a configuration value, so a value must read as a plain
// string there (a leading digit or dash might not), and API_KEYS is split
// on commas.
func NewSecretValue() (string, error) {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	const alnum = letters + "0123456789"
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random secret: %w", err)
	}
	out := make([]byte, len(b))
	out[0] = letters[int(b[0])%len(letters)]
	for i := 1; i < len(b); i++ {
		// 62 letters and digits from a byte: the bias (256 mod 62 = 8)
		// costs under 0.2 bits of ~190.
		out[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(out), nil
}

// secret is a rendered Secret; data nil leaves the values out, as printed
// manifests must.
func (o Options) secret(namespace, name, component string, data map[string][]byte) *corev1.Secret {
	meta := o.meta(name, component)
	meta.Namespace = namespace
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta,
		Type:       corev1.SecretTypeOpaque,
		// data rather than stringData: the server turns stringData into
		// data, and server-side apply then sees a field it never owned.
		Data: data,
	}
}

func secretObject(s *corev1.Secret) (Object, error) {
	u, err := toUnstructured(s)
	if err != nil {
		return Object{}, err
	}
	return Object{Resource: resSecret, Namespaced: true, Typed: s, Manifest: u}, nil
}

// secretRef is an environment variable read from a Secret's key.
func secretRef(name, secret, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
}

// Credentials are the secret values of one deployment, read from the
// cluster or generated. They are never printed.
type Credentials struct {
	NATS      map[string][]byte // NATSUsersSecret's data
	APIKey    []byte
	NewNATS   bool // NATSUsersSecret was created (or completed) now
	NewAPIKey bool
}

// Credentials reads the NATS passwords and the api key from the cluster,
// and generates the ones missing: a redeploy keeps what clients and
// nats-server already use.
func (c *Cluster) Credentials(ctx context.Context, o Options) (Credentials, error) {
	var cr Credentials
	users, err := c.secretData(ctx, o.NATSNamespace, NATSUsersSecret)
	if err != nil {
		return cr, err
	}
	cr.NATS = maps.Clone(users)
	if cr.NATS == nil {
		cr.NATS = map[string][]byte{}
	}
	for _, k := range natsPasswordKeys() {
		if len(cr.NATS[k]) > 0 {
			continue
		}
		v, err := NewSecretValue()
		if err != nil {
			return cr, err
		}
		cr.NATS[k], cr.NewNATS = []byte(v), true
	}
	keys, err := c.secretData(ctx, o.Namespace, o.apiKeySecretName())
	if err != nil {
		return cr, err
	}
	cr.APIKey = keys[APIKeysKey]
	if len(cr.APIKey) == 0 {
		v, err := NewSecretValue()
		if err != nil {
			return cr, err
		}
		cr.APIKey, cr.NewAPIKey = []byte(v), true
	}
	return cr, nil
}

// CredentialSecrets are the Secrets to apply with their values: the NATS
// users' Secret in the NATS namespace (only when it was created or
// completed: nats-server's copy is not rewritten otherwise), the api's and
// workers' NATS passwords, and the api key.
func CredentialSecrets(o Options, cr Credentials) ([]Object, error) {
	var secrets []*corev1.Secret
	if cr.NewNATS {
		users := o.secret(o.NATSNamespace, NATSUsersSecret, "", cr.NATS)
		// Shared by every deployment on this NATS: no deployment's labels.
		users.Labels = map[string]string{LabelPartOf: "genq", LabelManagedBy: ManagedBy}
		secrets = append(secrets, users)
	}
	secrets = append(secrets,
		o.natsSecret(map[string][]byte{
			NATSAPIPasswordKey:    cr.NATS[NATSAPIPasswordKey],
			NATSWorkerPasswordKey: cr.NATS[NATSWorkerPasswordKey],
		}),
		o.apiKeySecret(map[string][]byte{APIKeysKey: cr.APIKey}),
	)
	objs := make([]Object, 0, len(secrets))
	for _, s := range secrets {
		obj, err := secretObject(s)
		if err != nil {
			return nil, err
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// natsSecret holds the api's and the workers' NATS passwords, copied from
// NATSUsersSecret: a pod reads Secrets of its own namespace only. The batch
// password stays in the NATS namespace.
func (o Options) natsSecret(data map[string][]byte) *corev1.Secret {
	return o.secret(o.Namespace, o.natsSecretName(), "nats-auth", data)
}

func (o Options) apiKeySecret(data map[string][]byte) *corev1.Secret {
	return o.secret(o.Namespace, o.apiKeySecretName(), "api-key", data)
}

// secretData is a Secret's data, nil when it does not exist.
func (c *Cluster) secretData(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	u, err := c.Client.Resource(resSecret).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, c.unreachable(err))
	}
	raw, _, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		return nil, fmt.Errorf("read Secret %s/%s: %w", namespace, name, err)
	}
	data := make(map[string][]byte, len(raw))
	for k, v := range raw {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return nil, fmt.Errorf("read Secret %s/%s key %s: %w", namespace, name, k, err)
		}
		data[k] = b
	}
	return data, nil
}
