package natsqueue

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/pause"
	"github.com/genq/genq/internal/tenant"
)

// A swap of the counters whose answer is lost (its leader died, the
// connection moved to another node) may have been stored or not. It is
// sent again as it was, with the same message id, until it is answered:
// in a cluster the stream's deduplication, checked before the revision,
// acknowledges it again when it was stored, even once another write
// followed it (within the bucket's 2-minute deduplication window, far
// beyond a request's time for the counters); when it was not stored the
// revision check refuses it. A single server checks the revision first,
// so a refused resend is looked up: the record's last message carrying
// its id was stored. A write is so counted once, never twice, unless,
// on a single server that restarted, another api's write followed it
// before it was sent again.

// swapTry bounds one attempt of a swap, so that an answer lost with a
// node leaves time to send it again.
const swapTry = 2 * time.Second

// swapMsg is one compare-and-swap of a record.
type swapMsg struct {
	subject string
	data    []byte
	rev     uint64 // the subject's last revision it expects; 0: none
	id      string // its message id, the same in every attempt
	lost    bool   // an attempt's answer was lost
}

// swap writes data to subject if the subject's last revision is rev.
func (s *TenantStore) swap(ctx context.Context, subject string, data []byte, rev uint64) (uint64, error) {
	return s.send(ctx, &swapMsg{subject: subject, data: data, rev: rev, id: "genq-counters-" + rand.Text()})
}

// send sends m until it is answered.
func (s *TenantStore) send(ctx context.Context, m *swapMsg) (uint64, error) {
	for {
		ack, err := swapOnce(ctx, s.js, m.subject, m.data, m.rev, m.id)
		switch {
		case err == nil:
			return ack.Sequence, nil // a duplicate's is the stored one's
		case wrongRevision(err) && m.lost:
			return s.storedEarlier(ctx, m)
		case wrongRevision(err):
			return 0, tenant.ErrConflict
		case !answerLost(err):
			return 0, err
		}
		m.lost = true
		if perr := pause.For(ctx, leaderReadPause); perr != nil {
			return 0, fmt.Errorf("swap %s at revision %d, its outcome unknown: %w", m.subject, m.rev, errors.Join(err, perr))
		}
	}
}

// storedEarlier is the revision of m's earlier attempt when the record's
// last message is it, else tenant.ErrConflict.
func (s *TenantStore) storedEarlier(ctx context.Context, m *swapMsg) (uint64, error) {
	last, err := leaderLast(ctx, s.nc, "KV_"+TenantsBucket, m.subject)
	if err != nil {
		return 0, fmt.Errorf("swap %s at revision %d, its outcome unknown: %w", m.subject, m.rev, err)
	}
	if last != nil && last.msgID() == m.id {
		return last.Seq, nil
	}
	return 0, tenant.ErrConflict
}

// swapOnce is one attempt of a swap.
func swapOnce(ctx context.Context, js jetstream.JetStream, subject string, data []byte, rev uint64, id string) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, swapTry)
	defer cancel()
	return js.Publish(ctx, subject, data, jetstream.WithMsgID(id), jetstream.WithExpectLastSequencePerSubject(rev))
}

// wrongRevision says whether err is the stream refusing a write at a
// revision that is no longer the subject's.
func wrongRevision(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) &&
		(api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// answerLost says whether err leaves a write's outcome unknown, or is the
// stream without a leader for a moment: worth sending the write again.
func answerLost(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, jetstream.ErrNoStreamResponse) || electing(err)
}
