package natsqueue

import (
	"fmt"

	"github.com/genq/genq/internal/genq"
)

// Class is a job's priority class. It picks the subject the job is
// published to, and with it the stream, the capacity and the consumer it
// goes through: interactive and batch jobs never share a capacity, so a
// full batch queue cannot make an interactive caller get 429, and workers
// take a batch job only when no interactive job is waiting.
type Class int

const (
	// Interactive jobs have a caller waiting on an open request: the api's
	// synchronous routes. genq.jobs.<variant>, GENQ_JOBS, QUEUE_CAPACITY.
	// Producers that name no class, old ones included, land here.
	Interactive Class = iota
	// Batch jobs have nobody waiting on a connection: genqctl submit, the
	// async job routes, direct NATS producers that opt in.
	// genq.batch.<variant>, GENQ_BATCH_JOBS, BATCH_QUEUE_CAPACITY.
	Batch
)

func (c Class) String() string {
	if c == Batch {
		return "batch"
	}
	return "interactive"
}

// Subject is where jobs of this class and variant v are published.
func (c Class) Subject(v genq.Variant) string {
	if c == Batch {
		return BatchSubject(v)
	}
	return JobsSubject(v)
}

// Stream holds the jobs of this class.
func (c Class) Stream() string {
	if c == Batch {
		return BatchStream
	}
	return JobsStream
}

// Consumer is the durable consumer the workers of variant v pull this
// class's jobs from.
func (c Class) Consumer(v genq.Variant) string {
	if c == Batch {
		return BatchConsumerName(v)
	}
	return ConsumerName(v)
}

// streamSubjects are the subjects class c's stream holds: one per variant,
// one per variant and tenant (TenantSubject), and for interactive jobs one
// per variant and worker (RoutedSubject).
func (c Class) streamSubjects() []string {
	if c == Batch {
		return []string{BatchSubject("*"), tenantSubjects(c, "*")}
	}
	return []string{JobsSubject("*"), JobsSubject("*") + ".*", tenantSubjects(c, "*")}
}

func (c Class) streamDescription() string {
	return fmt.Sprintf("genq %s jobs, one subject per variant", c)
}
