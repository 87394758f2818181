// Package otelcoltest runs genq's test OpenTelemetry Collector (test/otelcol,
// built by scripts/build-otelcol.sh) for tests: the OTLP receiver on free
// loopback ports, its spans written by the file exporter, read back here.
// Tests hold genq's spans to what a real collector received, not to what an
// in-process exporter was handed.
package otelcoltest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Collector is a running collector.
type Collector struct {
	// HTTP and GRPC are the OTLP receiver's endpoints, as
	// OTEL_EXPORTER_OTLP_ENDPOINT takes them.
	HTTP, GRPC string
	file       string
}

// Binary is the collector's path: $OTELCOL (make test sets it), else what
// scripts/build-otelcol.sh builds or finds in its cache. A collector that
// cannot be had skips the test, or fails it under GENQ_REQUIRE_OTELCOL=1.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("OTELCOL"); p != "" {
		return p
	}
	_, here, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(here), "..", "..", "scripts", "build-otelcol.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := fmt.Sprintf("the test collector could not be built (%s: %v): %s", script, err, strings.TrimSpace(stderr.String()))
		if os.Getenv("GENQ_REQUIRE_OTELCOL") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return strings.TrimSpace(string(out))
}

// Start runs a collector until the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	c := &Collector{file: filepath.Join(dir, "spans.json")}
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	c.HTTP, c.GRPC = "http://"+httpAddr, "http://"+grpcAddr
	cfg := fmt.Sprintf(config, grpcAddr, httpAddr, c.file)
	cfgFile := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config", cfgFile)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the collector: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("collector's log:\n%s", log.String())
		}
	})
	for _, addr := range []string{httpAddr, grpcAddr} {
		if err := waitListening(addr, exited); err != nil {
			t.Fatalf("the collector never listened on %s: %v\n%s", addr, err, log.String())
		}
	}
	return c
}

// config is the collector's: OTLP in over gRPC and HTTP, every span out to
// a file as OTLP JSON, flushed often.
const config = `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  file:
    path: %s
    flush_interval: 50ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
`

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitListening(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-exited:
			return fmt.Errorf("the collector exited")
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Raw is everything the collector wrote, as it wrote it.
func (c *Collector) Raw() ([]byte, error) {
	b, err := os.ReadFile(c.file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	return b, err
}

// Span is one span as the collector exported it.
type Span struct {
	Service                       string
	TraceID, SpanID, ParentSpanID string
	Name                          string
	Kind                          int
	Start, End                    time.Time
	Attributes                    map[string]any
	StatusCode                    int
	Links                         []Link
}

// Link is a span's link to a span of another trace.
type Link struct{ TraceID, SpanID string }

// Spans are the spans the collector has written so far.
func (c *Collector) Spans() ([]Span, error) {
	raw, err := c.Raw()
	if err != nil {
		return nil, err
	}
	// A line still being written is read next time.
	raw = raw[:bytes.LastIndexByte(raw, '\n')+1]
	var spans []Span
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var doc traces
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			return nil, fmt.Errorf("the collector's file: %w", err)
		}
		for _, rs := range doc.ResourceSpans {
			service := attrs(rs.Resource.Attributes)["service.name"]
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans = append(spans, s.span(fmt.Sprint(service)))
				}
			}
		}
	}
	return spans, sc.Err()
}

// WaitFor polls the collector's spans until done holds of them, or fails
// the test after within.
func (c *Collector) WaitFor(ctx context.Context, within time.Duration, done func([]Span) bool) ([]Span, error) {
	deadline := time.Now().Add(within)
	for {
		spans, err := c.Spans()
		if err != nil {
			return nil, err
		}
		if done(spans) {
			return spans, nil
		}
		if time.Now().After(deadline) {
			return spans, fmt.Errorf("the collector's spans were not all there after %s (%d spans)", within, len(spans))
		}
		select {
		case <-ctx.Done():
			return spans, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// OTLP JSON, as the file exporter writes it.
type traces struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []keyValue `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []jsonSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type jsonSpan struct {
	TraceID      string     `json:"traceId"`
	SpanID       string     `json:"spanId"`
	ParentSpanID string     `json:"parentSpanId"`
	Name         string     `json:"name"`
	Kind         int        `json:"kind"`
	Start        string     `json:"startTimeUnixNano"`
	End          string     `json:"endTimeUnixNano"`
	Attributes   []keyValue `json:"attributes"`
	Status       struct {
		Code int `json:"code"`
	} `json:"status"`
	Links []struct {
		TraceID string `json:"traceId"`
		SpanID  string `json:"spanId"`
	} `json:"links"`
}

type keyValue struct {
	Key   string `json:"key"`
	Value struct {
		String *string  `json:"stringValue"`
		Int    *string  `json:"intValue"` // OTLP JSON writes 64-bit integers as strings
		Bool   *bool    `json:"boolValue"`
		Double *float64 `json:"doubleValue"`
	} `json:"value"`
}

func (s jsonSpan) span(service string) Span {
	sp := Span{Service: service, TraceID: normID(s.TraceID), SpanID: normID(s.SpanID), ParentSpanID: normID(s.ParentSpanID),
		Name: s.Name, Kind: s.Kind, Start: unixNano(s.Start), End: unixNano(s.End), Attributes: attrs(s.Attributes), StatusCode: s.Status.Code}
	for _, l := range s.Links {
		sp.Links = append(sp.Links, Link{TraceID: normID(l.TraceID), SpanID: normID(l.SpanID)})
	}
	return sp
}

// normID is an id in lower-case hex, as traceparent writes it.
func normID(id string) string {
	if _, err := hex.DecodeString(id); err == nil {
		return strings.ToLower(id)
	}
	return id
}

func unixNano(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func attrs(kvs []keyValue) map[string]any {
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		switch v := kv.Value; {
		case v.String != nil:
			out[kv.Key] = *v.String
		case v.Int != nil:
			n, _ := strconv.ParseInt(*v.Int, 10, 64)
			out[kv.Key] = n
		case v.Bool != nil:
			out[kv.Key] = *v.Bool
		case v.Double != nil:
			out[kv.Key] = *v.Double
		}
	}
	return out
}
