// Package natsqueue adapts NATS JetStream to genq's words: it queues jobs,
// hands them to workers, carries results of any size back, keeps worker
// heartbeats and cancellations. docs/protocol.md describes the same protocol
// for producers written in other languages; keep the two in step.
package natsqueue

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

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
	// HeaderReceipt on a job says its producer confirms each reply it
	// takes: the worker sends the reply as a request, and a confirmed
	// reply of a job without store is not stored (docs/protocol.md, "Every
	// result is also stored").
	HeaderReceipt = "Genq-Receipt"

	KindWakeup = "wakeup"
	// ReceiptTaken is the producer's answer to a reply it handed to its
	// waiting caller; any other answer, or none, and the worker stores the
	// result as for any job.
	ReceiptTaken = "taken"
	StatusOK     = "ok"
	StatusErr    = "error"
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

// RoutedSubject is where jobs of variant v meant for one worker are
// published: a subject of GENQ_JOBS beside the shared one, pulled by that
// worker's own consumer first and by any idle worker once the job has
// waited too long (docs/protocol.md, "Routing by prefix").
func RoutedSubject(v genq.Variant, workerID string) string {
	return JobsSubject(v) + "." + workerToken(workerID)
}

// RoutedConsumerName is the durable pull consumer of one worker's subject.
func RoutedConsumerName(v genq.Variant, workerID string) string {
	return routedConsumerPrefix(v) + workerToken(workerID)
}

// routedConsumerPrefix begins the name of every worker's own consumer of
// variant v; what follows is the worker's token, the last token of its
// subject.
func routedConsumerPrefix(v genq.Variant) string { return ConsumerName(v) + "-to-" }

// workerToken is a worker id as one subject token that is also valid in a
// consumer name. An id that needs changing gets a hash of itself appended,
// so two ids that differ only in the characters replaced stay apart.
func workerToken(id string) string {
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
	if clean == id && id != "" && len(id) <= maxWorkerToken {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return clean[:min(len(clean), maxWorkerToken-9)] + "-" + hex.EncodeToString(sum[:4])
}

// maxWorkerToken bounds a worker's token, so its consumer's name stays
// well inside JetStream's limit on names.
const maxWorkerToken = 64

// BatchConsumerName is the durable pull consumer of BatchStream the workers
// of variant v share.
func BatchConsumerName(v genq.Variant) string { return "genq-worker-batch-" + string(v) }

// errorBody is the body of an error reply, and of a stored error result.
type errorBody struct {
	Code  genq.Code `json:"code"`
	Error string    `json:"error"`
	// Field names the job's field at fault, where the worker knows it
	// (an embedding job's input or dimensions): OpenAI's param.
	Field string `json:"field,omitempty"`
}

// Streaming (docs/protocol.md, "Streaming"): a worker running a job with
// stream set publishes its text as chunks, core NATS messages to the job's
// reply subject, before the usual reply. Each chunk names its delivery
// attempt and its place in that attempt's run, so a producer can tell a
// lost chunk or a second run from the text that belongs to the answer.
const (
	HeaderChunkSeq = "Genq-Chunk-Seq" // a chunk's place in its run, from 1
	HeaderLogprobs = "Genq-Logprobs"  // a chunk's tokens' log-probabilities, JSON, when the job asked for them
	HeaderPartial  = "Genq-Partial"   // an image chunk's place among the job's previews, from 0
	KindChunk      = "chunk"          // Genq-Kind of a chunk

	// HeaderPromptTokens, on a run's first text chunk: the prompt's
	// tokens and those of them the prefix cache held, "120 64".
	HeaderPromptTokens = "Genq-Prompt-Tokens"

	// HeaderPart is "reasoning" on a chunk of the answer's reasoning
	// (genq.TextPiece.Reasoning, the result's "reasoning"), whose body is
	// that text; a chunk without it carries the answer's text. Reasoning
	// comes before any text.
	HeaderPart    = "Genq-Part"
	PartReasoning = "reasoning"
)

// ChunkSubject is where the chunks of a streaming job whose reply goes to
// replyTo are published: a subject of their own, so that a producer's
// reply handler never mistakes a chunk for the reply.
func ChunkSubject(replyTo string) string { return replyTo + ".chunks" }

// WaitingSubject is where a worker asks a job's caller whether it still
// waits for the reply to replyTo: "yes" or "no" (Client answers). A worker
// that finds a job's earlier run ended without its ack asks before it runs
// the job again: a caller that had its answer from that run says no.
func WaitingSubject(replyTo string) string { return replyTo + ".waiting" }

// Fair share between tenants (docs/protocol.md §11): a tenant's jobs have
// a subject and a durable consumer of their own in each class's stream,
// and every message of a tenant's job, routed ones included, names its
// tenant and its cost, so a worker charges it without decoding the body.
const (
	HeaderTenant = "Genq-Tenant" // the tenant a job's work is counted to
	HeaderCost   = "Genq-Cost"   // the job's estimated tokens: its prompt's and its answer's bound
	HeaderWeight = "Genq-Weight" // the tenant's weight, for its consumer when it must be made again

	// tenantToken is the subject token between the variant and the
	// tenant's: a tenant's subject has one token more than a worker's
	// (genq.jobs.<V>.<W>), so the two never overlap, whatever the names.
	tenantToken = "t"
	// Metadata of a tenant's consumer: its tenant, and its weight, which
	// the api writes and the workers read as they list the consumers.
	metaTenant = "genq-tenant"
	metaWeight = "genq-weight"
)

// BellSubject is where a producer rings, with an empty core NATS message,
// after it queued a tenant's job of variant v: idle workers wait for the
// bell, not in a pull on one consumer, since a tenant's job may arrive on
// any of many. genq.bell.<V>, in no stream.
func BellSubject(v genq.Variant) string { return "genq.bell." + string(v) }

// TenantSubject is where class c's jobs of variant v and of tenant are
// published: genq.jobs.<V>.t.<tenant> or genq.batch.<V>.t.<tenant>.
func TenantSubject(c Class, v genq.Variant, tenant string) string {
	return c.Subject(v) + "." + tenantToken + "." + workerToken(tenant)
}

// tenantSubjects matches the subjects of every tenant of class c and
// variant v (v may be "*").
func tenantSubjects(c Class, v genq.Variant) string {
	return c.Subject(v) + "." + tenantToken + ".*"
}

// parseTenantSubject reads the variant and the tenant's token of a
// TenantSubject; ok is false for any other subject.
func parseTenantSubject(subject string) (v genq.Variant, tenant string, ok bool) {
	// genq.jobs.<V>.t.<T> or genq.batch.<V>.t.<T>
	tokens := strings.Split(subject, ".")
	if len(tokens) != 5 || tokens[3] != tenantToken {
		return "", "", false
	}
	return genq.Variant(tokens[2]), tokens[4], true
}

// TenantConsumerName is the durable consumer of TenantSubject.
func TenantConsumerName(c Class, v genq.Variant, tenant string) string {
	return tenantConsumerPrefix(c, v) + workerToken(tenant)
}

// tenantConsumerPrefix begins the name of every tenant's consumer of class
// c and variant v. No worker's consumer begins so: theirs go on with "-to-".
func tenantConsumerPrefix(c Class, v genq.Variant) string { return c.Consumer(v) + "-tenant-" }
