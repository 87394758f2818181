// Package healthcheck is the probe the container images run as their
// HEALTHCHECK (`api healthcheck`, `worker healthcheck`): the api's image has
// no shell and neither image has an HTTP client, so the binaries ask
// themselves over loopback.
package healthcheck

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
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

// Probe GETs rawURL (plain HTTP) and succeeds on a 2xx status. It speaks
// HTTP/1.0 over a bare connection: net/http's client would add its
// transport, TLS and HTTP/2 code to binaries that otherwise only serve.
func Probe(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("probe %q: want an http:// URL", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", u.RequestURI(), u.Host); err != nil {
		return fmt.Errorf("unhealthy: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("unhealthy: GET %s: %w", rawURL, err)
	}
	// "HTTP/1.1 200 OK"
	_, status, _ := strings.Cut(strings.TrimSpace(line), " ")
	if !strings.HasPrefix(status, "2") {
		return fmt.Errorf("unhealthy: GET %s answered %q", rawURL, status)
	}
	return nil
}
