package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/genq/genq/internal/genq"
)

// TenantQueues tells each tenant's jobs waiting and running on every
// queue (natsqueue.Conn).
type TenantQueues interface {
	TenantQueues(ctx context.Context) ([]genq.TenantQueue, error)
}

// queueDepth is GET /queue's answer: a queue's tenants' jobs, waiting and
// running, summed over tenants and classes, and each tenant's line.
type queueDepth struct {
	Queue genq.Variant `json:"queue"`
	// Jobs is Waiting plus Running: what KEDA's metrics-api trigger
	// scales a queue's workers on, one worker per SLOTS jobs, as the
	// nats-jetstream triggers do on the shared consumers' lag.
	Jobs    uint64             `json:"jobs"`
	Waiting uint64             `json:"waiting"`
	Running uint64             `json:"running"`
	Tenants []genq.TenantQueue `json:"tenants"`
}

// queueTimeout bounds one reading of the tenants' consumers.
const queueTimeout = 2 * time.Second

// handleQueueDepth answers GET /queue?queue=Q with queue Q's tenants'
// jobs (every queue's with no Q). It is on the internal address, beside
// /metrics, for KEDA: a trigger per tenant consumer could not follow
// tenants made at runtime, and this sum does.
func handleQueueDepth(queues TenantQueues, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), queueTimeout)
		defer cancel()
		all, err := queues.TenantQueues(ctx)
		if err != nil {
			writeError(w, log, err)
			return
		}
		d := queueDepth{Queue: genq.Variant(r.URL.Query().Get("queue")), Tenants: []genq.TenantQueue{}}
		for _, q := range all {
			if d.Queue != "" && q.Queue != d.Queue {
				continue
			}
			d.Tenants = append(d.Tenants, q)
			d.Waiting += q.Waiting
			d.Running += q.Running
		}
		d.Jobs = d.Waiting + d.Running
		writeJSON(w, http.StatusOK, d)
	}
}
