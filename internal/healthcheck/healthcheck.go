// Package healthcheck is the probe the container images run as their
// HEALTHCHECK (`api healthcheck`, `worker healthcheck`): the api's image has
// no shell and neither image has an HTTP client, so the binaries ask
// themselves over loopback.
package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Timeout bounds one probe; the container runtime's own timeout is the
// outer bound.
const Timeout = 3 * time.Second

// LocalURL is the loopback URL of path on a server that listens on addr
// (":9091", "0.0.0.0:9091" or "host:9091").
func LocalURL(addr, path string) (string, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return "", fmt.Errorf("listen address %q has no port: %v", addr, err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", port) + path, nil
}

// Probe GETs url and succeeds on a 2xx answer.
func Probe(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("unhealthy: GET %s answered %s", url, resp.Status)
	}
	return nil
}
