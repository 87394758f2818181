package httpapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genq/genq/internal/genq"
	"github.com/genq/genq/internal/tenant"
	"github.com/genq/genq/internal/webhook"
)

// HeaderJobID carries the id of the job a request became; a webhook
// carries it too.
const HeaderJobID = webhook.HeaderJobID

type rootResponse struct {
	Message       string       `json:"message"`
	CUDAAvailable bool         `json:"cuda_available"`
	Variant       genq.Variant `json:"variant"`
	LiveWorkers   int          `json:"live_workers"`
	// Devices are what the live workers compute on, and with which engine,
	// each kind once.
	Devices []genq.Device `json:"devices,omitempty"`
}

func (s *Server) handleRoot(w http.ResponseWriter, r *http.Request) {
	live := s.workers.Live()
	cuda := false
	var devices []genq.Device
	for _, hb := range live {
		cuda = cuda || hb.Device.IsCUDA()
		if !slices.Contains(devices, hb.Device) {
			devices = append(devices, hb.Device)
		}
	}
	writeJSON(w, http.StatusOK, rootResponse{
		Message: "Hello World", CUDAAvailable: cuda, Variant: s.cfg.Variant, LiveWorkers: len(live), Devices: devices,
	})
}

type readinessResponse struct {
	Status string `json:"status"`
}

// handleReadiness answers at once. With no live worker it also queues a
// wake-up signal, so an autoscaler that watches the queue starts one:
// clients call this route ahead of traffic to wake idle nodes (docs/api.md).
// Kubernetes' own readiness probe calls it too, every few seconds: that is
// no sign of traffic, and waking on it would keep the workers from ever
// scaling to zero.
func (s *Server) handleReadiness(w http.ResponseWriter, r *http.Request) {
	probe := strings.HasPrefix(r.UserAgent(), "kube-probe/")
	if !probe && len(s.workers.Live()) == 0 && s.wakeDue(time.Now()) {
		go s.wake()
	}
	writeJSON(w, http.StatusOK, readinessResponse{Status: "ready"})
}

func (s *Server) wakeDue(now time.Time) bool {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if now.Sub(s.lastWake) < s.cfg.WakeupEvery {
		return false
	}
	s.lastWake = now
	return true
}

func (s *Server) wake() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.waker.PublishWakeup(ctx, s.cfg.Variant, time.Now()); err != nil {
		s.log.Warn("could not queue a wake-up signal", "err", err)
		return
	}
	s.metrics.wakeups.Inc()
	s.log.Info("no live worker; queued a wake-up signal")
}

// generateRequest reads and checks a POST /generate, or refuses it.
func (s *Server) generateRequest(w http.ResponseWriter, r *http.Request, start time.Time) (genq.Job, bool) {
	body, ok := s.requestBody(w, r, writeError)
	if !ok {
		return genq.Job{}, false
	}
	text, err := decodePrompt(body, s.promptBytes())
	if err != nil {
		s.reject(w, err)
		return genq.Job{}, false
	}
	job := genq.Job{Envelope: genq.Envelope{ID: s.newID(), Variant: s.cfg.Variant, Text: text, Deadline: start.Add(s.cfg.JobTimeout)}}
	err = job.Validate()
	if err == nil {
		err = s.workerLimits().Check(job)
	}
	if err != nil {
		s.reject(w, err)
		return genq.Job{}, false
	}
	return job, true
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	_, span := s.startSpan(r.Context(), "decode request")
	job, ok := s.generateRequest(w, r, start)
	endDecode(span, []genq.Job{job}, ok)
	if !ok {
		return
	}
	cost := tenant.Cost{Tokens: s.reserve([]genq.Job{job})}
	if s.cfg.Variant.Kind() == genq.OutputImage {
		cost = tenant.Cost{Images: 1}
	}
	if err := s.admit(w, r, admission{resolved: s.variantModel(), cost: cost, deadline: job.Deadline}); err != nil {
		writeError(w, s.log, err)
		return
	}
	log := s.log.With("job_id", job.ID)
	w.Header().Set(HeaderJobID, job.ID)

	// The request's context ends when the client goes away: the job is then
	// cancelled, whether it is still queued or already running.
	ctx, cancel := context.WithDeadline(r.Context(), job.Deadline)
	defer cancel()
	res, err := s.runJob(ctx, job, start, log, s.jobs.Run)
	if err != nil {
		writeError(w, log, err)
		return
	}
	defer res.Body.Close()

	w.Header().Set("Content-Type", res.ContentType)
	if res.Size > 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(res.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	// Large images stream from the results store as they are read.
	n, err := io.Copy(w, res.Body)
	s.metrics.generateSeconds.WithLabelValues("ok").Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Warn("result not fully sent", "bytes", n, "err", err)
		return
	}
	logDone(log, start, res, "bytes", n)
}
