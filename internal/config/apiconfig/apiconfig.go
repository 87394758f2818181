// Package apiconfig declares the api's settings (cmd/api): every flag and
// variable in one place, which cmd/api parses and internal/config writes
// docs/configuration.md from.
package apiconfig

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/tracing"
)

// Config is what the flags and the environment say.
type Config struct {
	Variant     string
	Addr        string
	Port        int
	MetricsAddr string
	LogLevel    string
	NATS        natsqueue.ConnectOptions
	Queue       natsqueue.Settings
	// The embedded nats-server's, used when NATS.URL is empty.
	EmbeddedPort       int
	EmbeddedStore      string
	EmbeddedMaxPayload int
	EmbeddedMonitor    int
	HTTP               httpapi.Config
	Tracing            tracing.Config
	Models             catalog.Config
	APIKeys            string
	APIKeysFile        string
	// Keys are API_KEYS' and API_KEYS_FILE's, read; GENQ_KEYS adds to them.
	Keys          []tenant.Key
	ShutdownGrace time.Duration
}

// Register declares the api's settings on fs, binding them to c.
func (c *Config) Register(fs *envflag.Set) {
	fs.Section("General")
	fs.String(&c.Variant, "variant", "VARIANT", "B", "variant served: A, B (text) or C (images)")
	fs.String(&c.LogLevel, "log-level", "LOG_LEVEL", "info", "debug, info, warn or error")
	fs.StringOff(&c.MetricsAddr, "metrics-addr", "METRICS_ADDR", ":9090", "internal address of /metrics, apart from the clients' port (empty: off)")

	fs.Section("Tracing")
	c.Tracing.RegisterFlags(fs, "genq-api")

	fs.Section("Models")
	c.Models.RegisterFlags(fs)

	fs.Section("NATS connection")
	c.NATS.RegisterFlags(fs, "")
	fs.Section("Queue")
	c.Queue.RegisterFlags(fs)
	// The workers and genqctl submit adopt the assets the api makes.
	for _, a := range []struct {
		from string
		envs []string
	}{
		{"the workers and genqctl submit take it from the job streams as the api made them", []string{"QUEUE_CAPACITY", "BATCH_QUEUE_CAPACITY", "JOB_MAX_AGE", "DEDUP_WINDOW", "NATS_REPLICAS"}},
		{"the workers take it from their consumer (its ack wait, its deliveries), rereading it every 30 s", []string{"JOB_ACK_WAIT", "JOB_MAX_ATTEMPTS"}},
		{"the workers take it from the results store as the api made it", []string{"RESULT_TTL", "RESULT_MAX_BYTES"}},
		{"the workers take it from the heartbeat bucket as the api made it", []string{"HEARTBEAT_TTL"}},
	} {
		for _, env := range a.envs {
			fs.Adopted(env, a.from)
		}
	}
	fs.Section("Embedded NATS server")
	fs.Int(&c.EmbeddedPort, "embedded-nats-port", "EMBEDDED_NATS_PORT", 4222, "port of the embedded nats-server, used when NATS_URL is empty")
	fs.String(&c.EmbeddedStore, "embedded-nats-store", "EMBEDDED_NATS_STORE", ".genq/nats", "JetStream storage directory of the embedded nats-server")
	fs.Int(&c.EmbeddedMaxPayload, "embedded-nats-max-payload", "EMBEDDED_NATS_MAX_PAYLOAD", 0, "max_payload of the embedded nats-server in bytes (0: the default 1 MB)")
	fs.Int(&c.EmbeddedMonitor, "embedded-nats-monitor-port", "EMBEDDED_NATS_MONITOR_PORT", 0, "monitoring port of the embedded nats-server (0: off)")

	fs.Section("HTTP api")
	fs.String(&c.Addr, "addr", "ADDR", "", "listen address; overrides --port")
	fs.Int(&c.Port, "port", "PORT", 8080, "HTTP port (80 in the container)")
	fs.Secret(&c.APIKeys, "api-keys", "API_KEYS", "comma-separated bearer tokens required on POST /generate and the /v1 routes, each a tenant of its own without limits (none, and none in API_KEYS_FILE or the GENQ_KEYS bucket: open)")
	fs.String(&c.APIKeysFile, "api-keys-file", "API_KEYS_FILE", "", "file of bearer tokens, one per line, each optionally followed by tenant=NAME rpm=N tpm=N tpd=N images_per_day=N concurrency=N weight=W models=a,b admin=true (docs/api.md, \"Keys, tenants and limits\")")
	fs.Duration(&c.ShutdownGrace, "shutdown-grace", "SHUTDOWN_GRACE", 60*time.Second, "how long requests in flight may finish after SIGTERM")

	c.HTTP.RegisterFlags(fs)
}

// Parse reads the api's settings from args and the environment (lookup,
// as os.LookupEnv), writing --help to out.
func Parse(args []string, lookup func(string) (string, bool), out io.Writer) (Config, error) {
	var c Config
	fs := envflag.NewLookup("api", lookup, out)
	c.Register(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	v, err := genq.ParseVariant(c.Variant)
	if err != nil {
		return c, err
	}
	c.HTTP.Variant = v
	if c.HTTP.Catalog, err = catalog.Load(c.Models, v, ""); err != nil {
		return c, err
	}
	c.HTTP.QueueCapacity = c.Queue.QueueCapacity
	if c.Addr == "" {
		c.Addr = ":" + strconv.Itoa(c.Port)
	}
	if c.Keys, err = loadAPIKeys(c.APIKeys, c.APIKeysFile); err != nil {
		return c, err
	}
	return c, nil
}

// loadAPIKeys reads API_KEYS and API_KEYS_FILE's lines. An error names
// the file's line and field, never a key.
func loadAPIKeys(list, file string) ([]tenant.Key, error) {
	var lines []byte
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read API keys file: %w", err)
		}
		lines = b
	}
	keys, err := tenant.ParseKeys(list, string(lines), "API_KEYS_FILE "+file)
	if err != nil {
		return nil, fmt.Errorf("API keys: %w", err)
	}
	return keys, nil
}
