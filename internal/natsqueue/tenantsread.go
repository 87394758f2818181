package natsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/genq/genq/internal/pause"
)

// A KV bucket's stream allows direct gets, which any replica answers once
// it is nearly caught up (nats-server enables them on a follower at 90%
// of the leader's log applied): such a read can miss writes that were
// acknowledged before it, by far right after a leader change. The
// tenants' counters decide admissions and report usage, so they are read
// from the stream's leader instead, through the JetStream API's message
// get, which only the leader answers and only once it has applied every
// committed write.

// leaderReadTry bounds one read of the counters; leaderReadTries and
// leaderReadPause let a read ride out a moment without a leader, as
// nats.go does for a publish without responders; a whole election (up
// to 9 s) refuses the read, as it would the swap that follows it.
const (
	leaderReadTry    = 5 * time.Second
	leaderReadTries  = 3
	leaderReadPause  = 250 * time.Millisecond
	kvOperationHdr   = "KV-Operation"
	errCodeNotLeader = 10008 // JSClusterNotAvailErr: no leader yet
)

// storedMsg is the message of a JetStream API message get.
type storedMsg struct {
	Subject string `json:"subject"`
	Seq     uint64 `json:"seq"`
	Header  []byte `json:"hdrs,omitempty"`
	Data    []byte `json:"data,omitempty"`
}

type msgGetResponse struct {
	Message *storedMsg          `json:"message,omitempty"`
	Error   *jetstream.APIError `json:"error,omitempty"`
}

// leaderLast reads the last message of subject in stream from the
// stream's leader: nil, with no error, when there is none.
func leaderLast(ctx context.Context, nc *nats.Conn, stream, subject string) (*storedMsg, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": subject})
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := range leaderReadTries {
		if try > 0 {
			if err := pause.For(ctx, leaderReadPause); err != nil {
				return nil, errors.Join(lastErr, err)
			}
		}
		m, err := leaderGet(ctx, nc, stream, req)
		if err == nil || !electing(err) {
			return m, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// leaderGet is one message get request.
func leaderGet(ctx context.Context, nc *nats.Conn, stream string, req []byte) (*storedMsg, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderReadTry)
	defer cancel()
	r, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return nil, fmt.Errorf("get from stream %s: %w", stream, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return nil, fmt.Errorf("get from stream %s: answer: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, nil
	case resp.Error != nil:
		return nil, fmt.Errorf("get from stream %s: %w", stream, resp.Error)
	case resp.Message == nil:
		return nil, fmt.Errorf("get from stream %s: an answer without a message", stream)
	}
	return resp.Message, nil
}

// electing says whether err is the stream's leader missing for a moment.
func electing(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.As(err, &api) && api.ErrorCode == errCodeNotLeader
}

// msgID is m's Nats-Msg-Id, if its headers read.
func (m *storedMsg) msgID() string {
	h, err := nats.DecodeHeadersMsg(m.Header)
	if err != nil {
		return ""
	}
	return h.Get(jetstream.MsgIDHeader)
}

// deleted says whether m is a KV delete or purge marker.
func (m *storedMsg) deleted() (bool, error) {
	if len(m.Header) == 0 {
		return false, nil
	}
	h, err := nats.DecodeHeadersMsg(m.Header)
	if err != nil {
		return false, fmt.Errorf("message %d's headers: %w", m.Seq, err)
	}
	op := h.Get(kvOperationHdr)
	return op == "DEL" || op == "PURGE", nil
}
