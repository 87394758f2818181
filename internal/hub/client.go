// Package hub downloads model snapshots from a Hugging Face Hub compatible
// server: it lists the files of a revision through the hub's HTTP API, then
// fetches each one through its resolve URL, verified, resumable and atomic.
//
// The token is only ever sent to the hub's own scheme and host: the CDN a
// resolve URL redirects to gets a pre-signed URL and no credential.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultEndpoint is the public hub, used when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// maxRedirects bounds a resolve chain: the hub answers one or two redirects
// (a renamed repository, then the CDN), never ten.
const maxRedirects = 10

// Client talks to one hub endpoint with one token.
type Client struct {
	endpoint *url.URL
	token    Token
	http     *http.Client
	retry    RetryPolicy
}

// ClientOptions tunes a Client. The zero value is usable.
type ClientOptions struct {
	// HTTPClient's Transport is used for every request; its CheckRedirect is
	// replaced. Nil means a client with sensible transport time-outs.
	HTTPClient *http.Client
	Retry      RetryPolicy
	// UserAgent is sent with every request; empty means "genq".
	UserAgent string
}

// NewClient returns a client for endpoint (like https://huggingface.co).
func NewClient(endpoint string, token Token, opts ClientOptions) (*Client, error) {
	u, err := parseEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	base := opts.HTTPClient
	if base == nil {
		base = &http.Client{Transport: defaultTransport()}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	ua := opts.UserAgent
	if ua == "" {
		ua = "genq"
	}
	c := &Client{endpoint: u, token: token, retry: opts.Retry.withDefaults()}
	c.http = &http.Client{
		Transport:     &authTransport{next: rt, hub: u, token: token, userAgent: ua},
		CheckRedirect: c.checkRedirect,
		Jar:           base.Jar,
		Timeout:       base.Timeout,
	}
	return c, nil
}

func parseEndpoint(endpoint string) (*url.URL, error) {
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil {
		return nil, fmt.Errorf("hub endpoint %q: %w", endpoint, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("hub endpoint %q: want an http(s) URL like %s", endpoint, DefaultEndpoint)
	}
	return u, nil
}

// defaultTransport has no overall time-out, since a 40 GB file takes as long
// as it takes, but it does give up on a server that never answers.
func defaultTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = 60 * time.Second
	t.MaxIdleConnsPerHost = 16
	return t
}

// Endpoint is the hub's base URL.
func (c *Client) Endpoint() string { return c.endpoint.String() }

// authTransport adds the token to requests for the hub's own scheme and host
// and to no other. Deciding per request, rather than trusting net/http's
// redirect rules, matters: net/http forwards Authorization to any subdomain
// and ignores the port, so a CDN at cdn.<hub> or at the hub's address on
// another port would receive the token.
type authTransport struct {
	next      http.RoundTripper
	hub       *url.URL
	token     Token
	userAgent string
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Del("Authorization")
	if t.isHub(req.URL) && !t.token.Empty() {
		req.Header.Set("Authorization", "Bearer "+t.token.value)
	}
	req.Header.Set("User-Agent", t.userAgent)
	return t.next.RoundTrip(req)
}

func (t *authTransport) isHub(u *url.URL) bool {
	return sameOrigin(u, t.hub)
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(hostPort(a), hostPort(b))
}

// hostPort spells the default port out, so that hub:443 and hub are one origin.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if strings.EqualFold(u.Scheme, "https") {
		return u.Hostname() + ":443"
	}
	return u.Hostname() + ":80"
}

// checkRedirect follows a resolve URL to its CDN, and records on the way
// the hub's metadata headers, which only the redirect response carries.
// HEAD requests stop at the first redirect away from the hub: that response
// is the metadata.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if m := metaFrom(req.Context()); m != nil && req.Response != nil {
		m.record(req.Response)
	}
	if req.Method == http.MethodHead && !sameOrigin(req.URL, c.endpoint) {
		return http.ErrUseLastResponse
	}
	// Never downgrade: a pre-signed URL over plain HTTP would leak it.
	if req.URL.Scheme == "http" && via[0].URL.Scheme == "https" {
		return fmt.Errorf("refusing a redirect from https to %s", redactURL(req.URL.String()))
	}
	return nil
}

// apiURL builds endpoint + the escaped path segments + query.
func (c *Client) apiURL(query url.Values, segments ...string) string {
	u := *c.endpoint
	var raw strings.Builder
	raw.WriteString(strings.TrimRight(u.EscapedPath(), "/"))
	for _, s := range segments {
		raw.WriteByte('/')
		raw.WriteString(s)
	}
	p, _ := url.PathUnescape(raw.String()) // segments are escaped by the callers
	u.Path = p
	u.RawPath = raw.String()
	u.RawQuery = query.Encode()
	return u.String()
}

// escapeRepo escapes each part of "org/name" but keeps the slash, as the hub does.
func escapeRepo(repo string) string {
	return escapePath(repo)
}

func escapePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

// getJSON GETs url into v, retrying as the policy says.
func (c *Client) getJSON(ctx context.Context, rawURL string, v any) (http.Header, error) {
	var header http.Header
	err := c.retry.do(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return permanent(err)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return err
		}
		defer drainClose(resp.Body)
		if err := checkStatus(resp); err != nil {
			return err
		}
		header = resp.Header
		if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(v); err != nil {
			return fmt.Errorf("decoding %s: %w", redactURL(rawURL), err)
		}
		return nil
	})
	return header, err
}

// drainClose reads a little of what is left so the connection can be reused.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(bad URL)"
	}
	u.RawQuery = "" // pre-signed CDN URLs carry their signature in the query
	return u.Redacted()
}

// isContextErr reports errors that come from our own cancellation, which no
// retry can fix.
func isContextErr(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
