package natsembed_test

import (
	"testing"

	"github.com/genq/genq/internal/natsembed"
)

func TestStart(t *testing.T) {
	tests := []struct {
		name string
		opts natsembed.Options
	}{
		{"loopback by default", natsembed.Options{Port: -1}},
		{"with a payload limit", natsembed.Options{Port: -1, MaxPayload: 4 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.StoreDir = t.TempDir()
			ns, err := natsembed.Start(tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
			if !ns.JetStreamEnabled() {
				t.Error("JetStream is off")
			}
			if host := ns.Addr().String(); host[:len("127.0.0.1:")] != "127.0.0.1:" {
				t.Errorf("listens on %s, want loopback", host)
			}
		})
	}
}
