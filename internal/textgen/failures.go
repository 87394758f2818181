package textgen

import (
	"fmt"

	"github.com/genq/genq/internal/textgen/utf8stream"
)

// failStep handles a step that failed to compute, given the sequences it
// carried. The engine writes only the cells of the step's own tokens, which
// belong to its sequences, so the other sequences go on untouched. Its sequences may hold anything in their
// cells: each starts over from its prompt (restart), its answer so far
// dropped (nothing of it has reached its caller yet). They are bisected:
// two halves that never share a step with anything else until every one
// of the half has finished, the halves one after the other. A sequence
// that fails every step it is in is thus cornered alone and gets err, and
// the others finish; when the failure came from the step as a whole (too
// large, say), the halves simply succeed.
func (s *scheduler) failStep(carried []*sequence, err error) {
	var seqs []*sequence
	for _, seq := range carried {
		if !seq.finished && !seq.redo {
			seqs = append(seqs, seq)
		}
	}
	if len(seqs) == 0 {
		return // a step planned before the failure: its sequences start over already
	}
	s.model.log.Error("text step failed", "err", err, "sequences", len(seqs))
	if len(seqs) == 1 {
		seqs[0].complete(s.model, err)
		return
	}
	half := (len(seqs) + 1) / 2
	for i, seq := range seqs {
		if i%half == 0 {
			s.groups++
		}
		seq.isolate, seq.redo = s.groups, true
	}
}

// isolating is the bisection group whose sequences alone may run now: the
// oldest with a sequence left, or 0 (everyone) when there is none.
func (s *scheduler) isolating() int {
	group := 0
	for _, seq := range s.active {
		if !seq.finished && seq.isolate > 0 && (group == 0 || seq.isolate < group) {
			group = seq.isolate
		}
	}
	return group
}

// restart puts seq back at the start of its prompt, with no cells and no
// answer, as start left it.
func (s *scheduler) restart(seq *sequence) {
	if seq.emitted > 0 || seq.emittedReasoning > 0 {
		// Its caller already has part of the answer, which a new start
		// need not repeat: fail it (retryable), and let the stream's
		// receiver end with an error rather than contradicting text.
		seq.complete(s.model, errStreamRestarted)
		return
	}
	if err := s.model.clearSlot(seq.slot); err != nil {
		seq.complete(s.model, fmt.Errorf("restart after a failed step: %w", err))
		return
	}
	seq.startFromPrefix(s.model)
	seq.next, seq.hasNext = 0, false
	seq.generated, seq.redo, seq.fed = 0, false, nil
	seq.logprobs, seq.emittedLP, seq.promptScores = nil, 0, nil
	seq.req.sampler.Restart()
	if c := seq.req.constraint; c != nil {
		c.start(seq.req)
	}
	seq.text.Reset()
	seq.utf8 = utf8stream.Stream{}
	seq.reasoning.Reset()
	seq.reasonUTF8 = utf8stream.Stream{}
	seq.reasonTokens, seq.thought, seq.forced, seq.trimLead = 0, false, nil, false
}

// fail ends every active sequence with err: a step that could not be
// planned leaves them in no known state, so all start over elsewhere (the
// error is retryable). A step that failed to compute is
// bisected instead (failStep).
func (s *scheduler) fail(err error) {
	s.model.log.Error("text step failed", "err", err)
	for _, seq := range s.active {
		if !seq.finished {
			seq.complete(s.model, err)
		}
	}
}

func (s *scheduler) failAll(err error) {
	for _, seq := range s.active {
		if !seq.finished {
			seq.finished = true
			seq.req.err = err
			close(seq.req.done)
		}
	}
	for _, req := range s.waiting {
		req.err = err
		close(req.done)
	}
	s.waiting = nil
drain:
	for {
		select {
		case req := <-s.submit:
			req.err = err
			close(req.done)
		default:
			break drain
		}
	}
}
