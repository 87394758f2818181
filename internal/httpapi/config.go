package httpapi

import (
	"time"

	"github.com/genq/genq/internal/envflag"
)

// RegisterFlags binds the settings of the routes, under the sections of
// the reference they belong to: the HTTP api's limits and timeouts, the
// asynchronous jobs with their webhooks, and the Batch API. The process
// fills the rest of c (variant, catalogue, keys, queue capacity).
func (c *Config) RegisterFlags(fs *envflag.Set) {
	fs.Section("HTTP api")
	fs.Int64(&c.MaxBodyBytes, "max-body-bytes", "MAX_BODY_BYTES", 1<<20, "largest request body; more gets 413")
	fs.Int64(&c.MaxV1BodyBytes, "max-v1-body-bytes", "MAX_V1_BODY_BYTES", 8<<20, "largest request body on the /v1 routes (conversations, tools, schemas); more gets 413")
	fs.Int(&c.MaxPromptBytes, "max-prompt-bytes", "MAX_PROMPT_BYTES", 0, "longest prompt text in bytes; more gets 400. 0: 8 bytes per token of the longest context the live workers announce (1 MiB at 131,072 tokens; 131,072 tokens' worth when none does), the workers judging the tokens (docs/api.md, \"Long prompts\")")
	fs.Int(&c.Images.MaxN, "image-max-n", "IMAGE_MAX_N", DefaultImageMaxN, "variant C: most images per POST /v1/images/generations")
	fs.Duration(&c.JobTimeout, "generate-timeout", "GENERATE_TIMEOUT", 5*time.Minute, "how long POST /generate waits, queueing included, before 504")
	fs.Duration(&c.WakeupEvery, "wakeup-interval", "WAKEUP_INTERVAL", 10*time.Second, "least time between two wake-up signals")
	fs.Duration(&c.ReadHeaderTimeout, "read-header-timeout", "READ_HEADER_TIMEOUT", 10*time.Second, "time a client has to send its request headers (slow clients are cut off)")
	fs.Duration(&c.ReadTimeout, "read-timeout", "READ_TIMEOUT", 30*time.Second, "time a client has to send its whole request")

	fs.Section("Asynchronous jobs and webhooks")
	fs.Duration(&c.Async.JobTimeout, "async-job-timeout", "ASYNC_JOB_TIMEOUT", DefaultAsyncJobTimeout, "deadline of a job queued by POST /v1/jobs, queueing included")
	fs.Secret(&c.Async.WebhookSecret, "webhook-secret", "WEBHOOK_SECRET", "HMAC-SHA256 key of the Genq-Signature header of webhooks (none: webhooks are refused)")
	fs.List(&c.Async.WebhookAllow, "webhook-allow", "WEBHOOK_ALLOW", "hosts webhooks may go to (none: webhooks are refused)")
	fs.Bool(&c.Async.WebhookAllowPrivate, "webhook-allow-private", "WEBHOOK_ALLOW_PRIVATE", false, "let webhooks reach loopback, private and link-local addresses (tests, closed networks)")
	fs.Int(&c.Async.WebhookAttempts, "webhook-attempts", "WEBHOOK_ATTEMPTS", DefaultWebhookAttempts, "deliveries of one webhook at most, 1 s apart and doubling")

	fs.Section("Batch API")
	fs.Int64(&c.Batches.MaxFileBytes, "max-file-bytes", "MAX_FILE_BYTES", DefaultMaxFileBytes, "largest file POST /v1/files takes (a batch's input); more gets 413")
	fs.Duration(&c.Batches.FileTTL, "file-ttl", "FILE_TTL", DefaultFileTTL, "how long files and batches are kept in JetStream")
}
