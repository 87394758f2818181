// Package webhook delivers a job's outcome to the URL its submitter gave:
// signed with HMAC-SHA256, only to hosts on an allow-list, and only to
// public addresses unless told otherwise, checked again at every dial.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/genq/genq/internal/genq"
)

// HeaderSignature signs a webhook: t=<unix seconds>,v1=<hex HMAC-SHA256
// of "<t>.<body>" keyed with WEBHOOK_SECRET>. The time inside the signed
// bytes lets a receiver refuse replays of an old delivery.
const HeaderSignature = "Genq-Signature"

// Sign returns the Genq-Signature value of body at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// HeaderJobID names the job a delivery is about; the api's answers carry
// the same header.
const HeaderJobID = "Genq-Job-Id"

// Config sets up deliveries.
type Config struct {
	// Secret keys the HMAC-SHA256 signature of every webhook; without one,
	// webhooks are refused. It never reaches the logs.
	Secret string
	// Allow lists the hosts webhooks may go to (exact names or IP literals,
	// no wildcards); without any, webhooks are refused.
	Allow []string
	// AllowPrivate lets webhooks reach loopback, private, link-local and
	// other non-public addresses: for tests and closed networks only.
	AllowPrivate bool
	// Attempts bounds the deliveries of one webhook; the waits between them
	// start at Backoff and double.
	Attempts int
	Backoff  time.Duration
	// Timeout bounds one delivery.
	Timeout time.Duration
}

// DefaultAttempts is Config.Attempts when it is zero.
const DefaultAttempts = 5

// Sender checks webhook URLs and delivers webhooks.
type Sender struct{ cfg Config }

// New returns a Sender of cfg, its zero fields given their defaults.
func New(cfg Config) Sender {
	cfg.Attempts = cmp.Or(cfg.Attempts, DefaultAttempts)
	cfg.Backoff = cmp.Or(cfg.Backoff, time.Second)
	cfg.Timeout = cmp.Or(cfg.Timeout, 10*time.Second)
	return Sender{cfg}
}

// Check refuses a webhook URL that is not http(s), whose host is not on
// the allow-list, or that names a non-public address. A host name is
// checked again, resolved, at every delivery (dialControl).
func (h Sender) Check(raw string) error {
	if h.cfg.Secret == "" || len(h.cfg.Allow) == 0 {
		return genq.Errorf(genq.Invalid, "webhooks are not enabled on this server (WEBHOOK_SECRET and WEBHOOK_ALLOW)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return genq.Errorf(genq.Invalid, "webhook must be an http or https URL without credentials")
	}
	host := strings.ToLower(u.Hostname())
	if !slices.ContainsFunc(h.cfg.Allow, func(a string) bool { return strings.EqualFold(a, host) }) {
		return genq.Errorf(genq.Invalid, "webhook host %q is not allowed on this server", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !h.cfg.AllowPrivate && !public(ip) {
		return genq.Errorf(genq.Invalid, "webhook host %q is not a public address", host)
	}
	return nil
}

// public reports whether ip is an address anyone on the internet could
// reach: not loopback, private, link-local (cloud metadata lives there),
// multicast or unspecified.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsLinkLocalUnicast() &&
		!ip.IsLinkLocalMulticast() && !ip.IsInterfaceLocalMulticast() && !ip.IsMulticast() && !ip.IsUnspecified() &&
		!netip.MustParsePrefix("100.64.0.0/10").Contains(ip) // carrier-grade NAT
}

// ErrNotPublic refuses a dial to an address that is not public.
var ErrNotPublic = errors.New("webhook address is not public")

// dialControl checks the address actually dialled, after resolution, so a
// name that resolves to a private address (or changes to one after the
// check at submit) is refused.
func (h Sender) dialControl(_, address string, _ syscall.RawConn) error {
	if h.cfg.AllowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !public(ip) {
		return fmt.Errorf("%w: %s", ErrNotPublic, host)
	}
	return nil
}

func (h Sender) client() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: h.dialControl}
	return &http.Client{
		Timeout:   h.cfg.Timeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConns: 1},
		// A redirect could lead anywhere: the allow-list is for the URL given.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Send delivers body, the outcome of job jobID, to target, signed, until
// a 2xx answer, the attempts run out, or ctx ends.
func (h Sender) Send(ctx context.Context, target string, jobID string, body []byte, log *slog.Logger) error {
	client := h.client()
	defer client.CloseIdleConnections()
	wait := h.cfg.Backoff
	var last error
	for attempt := 1; attempt <= h.cfg.Attempts; attempt++ {
		if attempt > 1 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(wait):
			}
			wait *= 2
		}
		last = h.post(ctx, client, target, jobID, body)
		if last == nil {
			return nil
		}
		log.Info("webhook delivery failed", "attempt", attempt, "err", last)
	}
	return fmt.Errorf("webhook not delivered after %d attempts: %w", h.cfg.Attempts, last)
}

func (h Sender) post(ctx context.Context, client *http.Client, target, jobID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "genq-webhook")
	req.Header.Set(HeaderJobID, jobID)
	req.Header.Set(HeaderSignature, Sign(h.cfg.Secret, time.Now(), body))
	resp, err := client.Do(req)
	if err != nil {
		// The URL may carry the receiver's own token: say only its host.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("post to %s: %w", req.URL.Host, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %d", req.URL.Host, resp.StatusCode)
	}
	return nil
}
