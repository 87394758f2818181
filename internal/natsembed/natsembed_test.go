package natsembed_test

import (
	"net"
	"strings"
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

// A server whose port is taken does not start, and says why: the server's
// own error, not only that it did not become ready (a test stack's port
// taken between its choice and the api's start read as "did not start").
func TestStartSaysWhyItDidNot(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	ns, err := natsembed.Start(natsembed.Options{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		ns.Shutdown()
		t.Fatalf("started on port %d, which is taken", port)
	}
	if !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error %q: want it to say the server did not start, and why", err)
	}
}
