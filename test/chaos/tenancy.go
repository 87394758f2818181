package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/genq/genq/internal/natsqueue"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/test/localstack"
)

// The tenants every scenario's requests can be sent as, and the check of
// their counters in GENQ_TENANTS against what the api admitted.

// chaosKeys are the tenants' keys: key, tenant, and the API_KEYS_FILE
// fields of its limits.
var chaosKeys = [][3]string{
	{"chaos-key-light-0001", "light", "rpm=100000 tpm=100000000 tpd=1000000000 concurrency=64 weight=1"},
	{"chaos-key-heavy-0002", "heavy", "rpm=100000 tpm=100000000 tpd=1000000000 concurrency=64 weight=3"},
}

// admitted is how many of outs the api admitted: all answered but those
// refused at admission, for a limit or for the counters out of reach.
func admitted(outs []localstack.Outcome) int {
	n := 0
	for _, o := range outs {
		body := string(o.Body)
		refused := o.Status == http.StatusTooManyRequests && strings.Contains(body, "rate limit reached") ||
			o.Status == http.StatusServiceUnavailable && strings.Contains(body, "counters are unavailable")
		if o.Status != 0 && !refused {
			n++
		}
	}
	return n
}

// checkCounters reads each tenant's counters of today, from the
// counters' leader, and compares their requests with those admitted.
func checkCounters(ctx context.Context, natsURL string, byTenant map[string][]localstack.Outcome) (string, error) {
	st := natsqueue.DefaultSettings()
	st.Adopt = true
	conn, err := natsqueue.Dial(ctx, natsqueue.ConnectOptions{URL: natsURL, Name: "chaos"}, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return "", fmt.Errorf("counters: %w", err)
	}
	defer conn.Close()
	store, err := conn.TenantStore(ctx)
	if err != nil {
		return "", fmt.Errorf("counters: %w", err)
	}
	l := tenant.NewLimiter(store, "chaos")
	var notes []string
	var bad []string
	for _, k := range chaosKeys {
		c, err := l.Today(ctx, k[1])
		if err != nil {
			return "", fmt.Errorf("counters of %s: %w", k[1], err)
		}
		outs := byTenant[k[1]]
		ok := 0
		for _, o := range outs {
			if o.Status == http.StatusOK {
				ok++
			}
		}
		want, got := admitted(outs), c.Total().Requests
		notes = append(notes, fmt.Sprintf("%s: %d sent, %d ok, %d admitted, %d counted", k[1], len(outs), ok, want, got))
		if got != int64(want) || c.Running(time.Now()) != 0 {
			bad = append(bad, fmt.Sprintf("%s counted %d of %d admitted, %d still running", k[1], got, want, c.Running(time.Now())))
		}
	}
	note := "counters: " + strings.Join(notes, "; ")
	if len(bad) > 0 {
		return note, fmt.Errorf("counters inconsistent: %s", strings.Join(bad, "; "))
	}
	return note, nil
}
