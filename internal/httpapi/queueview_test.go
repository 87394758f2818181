package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/genq/genq/internal/genq"
)

// fixedQueues are the tenants' consumers as a queue would list them.
type fixedQueues struct {
	lines []genq.TenantQueue
	err   error
}

func (f fixedQueues) TenantQueues(context.Context) ([]genq.TenantQueue, error) { return f.lines, f.err }

var someQueues = fixedQueues{lines: []genq.TenantQueue{
	{Tenant: "a", Queue: genq.VariantB, Class: "interactive", Waiting: 5, Running: 2},
	{Tenant: "a", Queue: genq.VariantB, Class: "batch", Waiting: 7, Running: 0},
	{Tenant: "b", Queue: genq.VariantB, Class: "interactive", Waiting: 1, Running: 1},
	{Tenant: "b", Queue: "chat_qwen3", Class: "interactive", Waiting: 4, Running: 3},
}}

// TestQueueDepthRoute: GET /queue on the internal address sums a queue's
// tenants' jobs over every tenant and class, what KEDA scales on; it is
// not there without the tenants' queues, and NATS away is a 503.
func TestQueueDepthRoute(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		queues     TenantQueues
		status     int
		jobs       uint64 // with status 200
		tenants    int
	}{
		{"one queue", "/queue?queue=B", someQueues, 200, 5 + 2 + 7 + 1 + 1, 3},
		{"a model's queue", "/queue?queue=chat_qwen3", someQueues, 200, 4 + 3, 1},
		{"a queue with no tenant", "/queue?queue=C", someQueues, 200, 0, 0},
		{"every queue", "/queue", someQueues, 200, 23, 4},
		{"NATS away", "/queue?queue=B", fixedQueues{err: genq.WrapError(genq.Unavailable, errors.New("no servers"), "the queue is unavailable")}, 503, 0, 0},
		{"no tenants' queues", "/queue?queue=B", nil, 404, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewMetricsHandler(prometheus.NewRegistry(), tc.queues, slog.New(slog.DiscardHandler))
			rec := send(h, http.MethodGet, tc.path, "", nil)
			if rec.Code != tc.status {
				t.Fatalf("%d %s; want %d", rec.Code, rec.Body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			var d queueDepth
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
				t.Fatal(err)
			}
			if d.Jobs != tc.jobs || d.Waiting+d.Running != d.Jobs || len(d.Tenants) != tc.tenants {
				t.Fatalf("%s: %+v; want %d jobs over %d tenants' lines", rec.Body, d, tc.jobs, tc.tenants)
			}
		})
	}
}
