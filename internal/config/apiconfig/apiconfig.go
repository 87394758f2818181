// Package apiconfig declares the api's settings (cmd/api): every flag and
// variable in one place, which cmd/api parses and internal/config writes
// docs/configuration.md from.
package apiconfig

import (
	"io"
	"strconv"
	"time"

	"github.com/genq/genq/internal/catalog"
	"github.com/genq/genq/internal/envflag"
	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/httpapi"
	"github.com/genq/genq/internal/natsembed"
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
	// ResultLooks: when the api looks in the results store for a job whose
	// reply is late.
	ResultLooks natsqueue.LateLooks
	// Embedded is the nats-server the api starts when NATS.URL is empty.
	Embedded natsembed.Settings
	HTTP     httpapi.Config
	Tracing  tracing.Config
	Models   catalog.Config
	APIKeys  tenant.KeySettings
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
	c.ResultLooks.RegisterFlags(fs)
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
	c.Embedded.RegisterFlags(fs)

	fs.Section("HTTP api")
	fs.String(&c.Addr, "addr", "ADDR", "", "listen address; overrides --port")
	fs.Int(&c.Port, "port", "PORT", 8080, "HTTP port (80 in the container)")
	c.APIKeys.RegisterFlags(fs)
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
	if err := c.ResultLooks.Validate(); err != nil {
		return c, err
	}
	c.HTTP.QueueCapacity = c.Queue.QueueCapacity
	if c.Addr == "" {
		c.Addr = ":" + strconv.Itoa(c.Port)
	}
	if c.Keys, err = c.APIKeys.Load(); err != nil {
		return c, err
	}
	return c, nil
}
