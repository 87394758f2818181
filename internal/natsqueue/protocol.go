// Package natsqueue adapts NATS JetStream to genq's words: it queues jobs,
// hands them to workers, carries results of any size back, keeps worker
// heartbeats and cancellations. docs/protocol.md describes the same protocol
// for producers written in other languages; keep the two in step.
package natsqueue

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// Names of the JetStream assets. They are part of the protocol.
const (
	JobsStream      = "GENQ_JOBS"       // work-queue stream of interactive jobs, subjects genq.jobs.<variant>
	BatchStream     = "GENQ_BATCH_JOBS" // work-queue stream of batch jobs, subjects genq.batch.<variant>
	DeadStream      = "GENQ_DEAD"       // dead-lettered jobs, subjects genq.dead.<variant>
	WorkersBucket   = "GENQ_WORKERS"    // KV: worker heartbeats, key <variant>.<worker id>
	CancelBucket    = "GENQ_CANCEL"     // KV: cancelled job ids
	ResultsBucket   = "GENQ_RESULTS"    // object store: results kept for later fetch, and large ones
	jobsSubjectFmt  = "genq.jobs.%s"
	batchSubjectFmt = "genq.batch.%s"
	deadSubjectFmt  = "genq.dead.%s"
)

// Message headers of the protocol.
const (
	HeaderMsgID       = "Nats-Msg-Id"        // job id, for the stream's dedup window
	HeaderKind        = "Genq-Kind"          // "job" (default) or "wakeup"
	HeaderJobID       = "Genq-Job-Id"        // on replies and dead letters
	HeaderStatus      = "Genq-Status"        // "ok" or "error" on replies
	HeaderContentType = "Content-Type"       // media type of an ok reply's bytes
	HeaderErrorCode   = "Genq-Error-Code"    // genq.Code of an error reply
	HeaderObject      = "Genq-Result-Object" // object name in GENQ_RESULTS when the bytes are not inline
	HeaderSize        = "Genq-Result-Size"   // length of the result in bytes
	HeaderQueueWaitMs = "Genq-Queue-Wait-Ms" // ms between queueing and the start of the run
	HeaderRunMs       = "Genq-Run-Ms"        // ms the backend ran
	HeaderAttempt     = "Genq-Attempt"       // delivery that produced the reply, from 1
	HeaderWorker      = "Genq-Worker"        // id of the worker that replied

	KindWakeup = "wakeup"
	StatusOK   = "ok"
	StatusErr  = "error"
)

// JobsSubject is the subject jobs of variant v are published to.
func JobsSubject(v genq.Variant) string { return fmt.Sprintf(jobsSubjectFmt, v) }

// BatchSubject is the subject batch jobs of variant v are published to.
// Workers take them only when no interactive job of v is waiting.
func BatchSubject(v genq.Variant) string { return fmt.Sprintf(batchSubjectFmt, v) }

// DeadSubject is the subject failed jobs of variant v are dead-lettered to.
func DeadSubject(v genq.Variant) string { return fmt.Sprintf(deadSubjectFmt, v) }

// ConsumerName is the durable pull consumer the workers of variant v share.
func ConsumerName(v genq.Variant) string { return "genq-worker-" + string(v) }

// BatchConsumerName is the durable pull consumer of BatchStream the workers
// of variant v share.
func BatchConsumerName(v genq.Variant) string { return "genq-worker-batch-" + string(v) }

// errorBody is the body of an error reply, and of a stored error result.
type errorBody struct {
	Code  genq.Code `json:"code"`
	Error string    `json:"error"`
}
