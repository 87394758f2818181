package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// AsyncConfig sets up POST /v1/jobs and its webhooks.
type AsyncConfig struct {
	// JobTimeout is an asynchronous job's deadline, queueing included.
	JobTimeout time.Duration
	// PollEvery is how often the api that accepted a job with a webhook
	// looks for its outcome in the results store.
	PollEvery time.Duration
	// WebhookSecret keys the HMAC-SHA256 signature of every webhook;
	// without one, webhooks are refused. It never reaches the logs.
	WebhookSecret string
	// WebhookAllow lists the hosts webhooks may go to (exact names or IP
	// literals, no wildcards); without any, webhooks are refused.
	WebhookAllow []string
	// WebhookAllowPrivate lets webhooks reach loopback, private,
	// link-local and other non-public addresses: for tests and closed
	// networks only.
	WebhookAllowPrivate bool
	// WebhookAttempts bounds the deliveries of one webhook; the waits
	// between them start at WebhookBackoff and double.
	WebhookAttempts int
	WebhookBackoff  time.Duration
	// WebhookTimeout bounds one delivery.
	WebhookTimeout time.Duration
}

// Defaults of AsyncConfig. An asynchronous job lives as long as a queued
// job may (JOB_MAX_AGE's default).
const (
	DefaultAsyncJobTimeout = time.Hour
	DefaultWebhookAttempts = 5
)

func (c AsyncConfig) withDefaults() AsyncConfig {
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultAsyncJobTimeout)
	c.PollEvery = cmp.Or(c.PollEvery, 500*time.Millisecond)
	c.WebhookAttempts = cmp.Or(c.WebhookAttempts, DefaultWebhookAttempts)
	c.WebhookBackoff = cmp.Or(c.WebhookBackoff, time.Second)
	c.WebhookTimeout = cmp.Or(c.WebhookTimeout, 10*time.Second)
	return c
}

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

type webhooks struct{ cfg AsyncConfig }

func (s *Server) webhooks() webhooks { return webhooks{s.cfg.Async.withDefaults()} }

// check refuses a webhook URL that is not http(s), whose host is not on
// the allow-list, or that names a non-public address. A host name is
// checked again, resolved, at every delivery (dialControl).
func (h webhooks) check(raw string) error {
	if h.cfg.WebhookSecret == "" || len(h.cfg.WebhookAllow) == 0 {
		return genq.Errorf(genq.Invalid, "webhooks are not enabled on this server (WEBHOOK_SECRET and WEBHOOK_ALLOW)")
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return genq.Errorf(genq.Invalid, "webhook must be an http or https URL without credentials")
	}
	host := strings.ToLower(u.Hostname())
	if !slices.ContainsFunc(h.cfg.WebhookAllow, func(a string) bool { return strings.EqualFold(a, host) }) {
		return genq.Errorf(genq.Invalid, "webhook host %q is not allowed on this server", host)
	}
	if ip, err := netip.ParseAddr(host); err == nil && !h.cfg.WebhookAllowPrivate && !public(ip) {
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

var errNotPublic = errors.New("webhook address is not public")

// dialControl checks the address actually dialled, after resolution, so a
// name that resolves to a private address (or changes to one after the
// check at submit) is refused.
func (h webhooks) dialControl(_, address string, _ syscall.RawConn) error {
	if h.cfg.WebhookAllowPrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !public(ip) {
		return fmt.Errorf("%w: %s", errNotPublic, host)
	}
	return nil
}

func (h webhooks) client() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: h.dialControl}
	return &http.Client{
		Timeout:   h.cfg.WebhookTimeout,
		Transport: &http.Transport{DialContext: dialer.DialContext, Proxy: nil, MaxIdleConns: 1},
		// A redirect could lead anywhere: the allow-list is for the URL given.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// send delivers body to target, signed, until a 2xx answer, the attempts
// run out, or ctx ends.
func (h webhooks) send(ctx context.Context, target string, jobID string, body []byte, log *slog.Logger) error {
	client := h.client()
	defer client.CloseIdleConnections()
	wait := h.cfg.WebhookBackoff
	var last error
	for attempt := 1; attempt <= h.cfg.WebhookAttempts; attempt++ {
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
	return fmt.Errorf("webhook not delivered after %d attempts: %w", h.cfg.WebhookAttempts, last)
}

func (h webhooks) post(ctx context.Context, client *http.Client, target, jobID string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "genq-webhook")
	req.Header.Set(HeaderJobID, jobID)
	req.Header.Set(HeaderSignature, Sign(h.cfg.WebhookSecret, time.Now(), body))
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

// watchJob waits for the outcome of a job with a webhook and delivers it.
// It lives in the api that accepted the job: if that api stops first, the
// webhook is not sent, and the job's status stays readable by GET.
func (s *Server) watchJob(async AsyncJobs, id string, rec jobRecord, log *slog.Logger) {
	h := s.webhooks()
	// The deadline, plus time for the outcome to be stored and the
	// deliveries to run their course.
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(rec.Deadline, 0).Add(5*time.Minute))
	defer cancel()
	tick := time.NewTicker(h.cfg.PollEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Warn("no outcome by the job's deadline; webhook not sent")
			return
		case <-tick.C:
		}
		st, _, err := s.jobStatus(ctx, async, id)
		if err != nil {
			log.Debug("job status unavailable; polling again", "err", err)
			continue
		}
		if st.Status == statusQueued || st.Status == statusRunning {
			continue
		}
		body, err := json.Marshal(st)
		if err != nil {
			log.Error("could not encode the webhook", "err", err)
			return
		}
		if err := h.send(ctx, rec.Webhook, id, body, log); err != nil {
			log.Warn("webhook not delivered", "err", err)
			return
		}
		log.Info("webhook delivered", "status", st.Status)
		return
	}
}
