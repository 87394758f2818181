package natsembed

import "github.com/genq/genq/internal/envflag"

// Settings are the embedded server's as the api's flags and environment
// give them: the api starts it when no NATS_URL is set.
type Settings struct {
	Port        int
	StoreDir    string
	MaxPayload  int
	MonitorPort int
}

// RegisterFlags binds the EMBEDDED_NATS_* settings.
func (s *Settings) RegisterFlags(fs *envflag.Set) {
	fs.Section("Embedded NATS server")
	fs.Int(&s.Port, "embedded-nats-port", "EMBEDDED_NATS_PORT", 4222, "port of the embedded nats-server, used when NATS_URL is empty")
	fs.String(&s.StoreDir, "embedded-nats-store", "EMBEDDED_NATS_STORE", ".genq/nats", "JetStream storage directory of the embedded nats-server")
	fs.Int(&s.MaxPayload, "embedded-nats-max-payload", "EMBEDDED_NATS_MAX_PAYLOAD", 0, "max_payload of the embedded nats-server in bytes (0: the default 1 MB)")
	fs.Int(&s.MonitorPort, "embedded-nats-monitor-port", "EMBEDDED_NATS_MONITOR_PORT", 0, "monitoring port of the embedded nats-server (0: off)")
}

// Options are the server's options from s.
func (s Settings) Options() Options {
	return Options{Port: s.Port, StoreDir: s.StoreDir, MaxPayload: int32(s.MaxPayload), HTTPPort: s.MonitorPort}
}
