package structured

import "strings"

// CallEvent is one thing a streamed answer says, read as it comes: a piece
// of content, the start of call Index (its name), or a piece of that
// call's arguments. The arguments' pieces join into the call's arguments
// as ParseToolCalls reads them from the whole answer.
type CallEvent struct {
	Content   string
	Start     bool
	Index     int
	Name      string
	Arguments string
}

// CallStream splits a streamed answer into content and tool calls, written
// as CompileToolCalls' grammar has them. With lazy set, the answer is
// calls only if it opens with a call; otherwise it is calls from the
// start. Text that is not calls goes out as content, so nothing the model
// wrote is lost.
type CallStream struct {
	state   callState
	pending string // bytes seen, not yet given out
	index   int    // the call being read
	args    jsonScanner
}

type callState int

const (
	callUndecided callState = iota // lazy: nothing but whitespace yet
	callHead                       // inside `{"name": "…", "parameters": `
	callArguments                  // inside the arguments' object
	callTail                       // after the arguments: the call's close, "; " and the next call
	callContent                    // not calls: everything is content
)

// NewCallStream starts reading an answer.
func NewCallStream(lazy bool) *CallStream {
	if lazy {
		return &CallStream{state: callUndecided}
	}
	return &CallStream{state: callHead}
}

// Calls reports whether the answer turned out to be calls.
func (s *CallStream) Calls() bool { return s.state != callUndecided && s.state != callContent }

// Write reads the next piece of the answer and returns what it says.
func (s *CallStream) Write(text string) []CallEvent {
	s.pending += text
	var out []CallEvent
	for {
		ev, more := s.step()
		if ev != nil {
			out = append(out, *ev)
		}
		if !more {
			return out
		}
	}
}

// Close gives out what is left: a call cut short (by the token limit)
// keeps its partial arguments, and undecided text is content.
func (s *CallStream) Close() []CallEvent {
	rest := s.pending
	s.pending = ""
	if rest == "" {
		return nil
	}
	switch s.state {
	case callUndecided, callContent:
		return []CallEvent{{Content: rest}}
	case callArguments:
		return []CallEvent{{Index: s.index, Arguments: rest}}
	}
	return nil
}

// step moves on by what pending allows: an event, and whether another
// step may move further.
func (s *CallStream) step() (*CallEvent, bool) {
	switch s.state {
	case callUndecided:
		t := strings.TrimLeft(s.pending, " \t\r\n")
		switch {
		case t == "":
			return nil, false
		case t[0] == LazyTrigger:
			s.state, s.pending = callHead, t
			return nil, true
		}
		s.state = callContent
		return nil, true
	case callContent:
		if s.pending == "" {
			return nil, false
		}
		ev := &CallEvent{Content: s.pending}
		s.pending = ""
		return ev, false
	case callHead:
		t := strings.TrimLeft(s.pending, " \t\r\n")
		switch opens(t, callOpen) {
		case litNo:
			s.state = callContent
			return nil, true
		case litSoFar:
			return nil, false
		}
		name, rest, ok := strings.Cut(t[len(callOpen):], `"`)
		if !ok {
			return nil, false
		}
		after := `"` + rest
		switch opens(after, callArgs) {
		case litNo:
			s.state = callContent
			return nil, true
		case litSoFar:
			return nil, false
		}
		s.pending = strings.TrimLeft(after[len(callArgs):], " \t\r\n")
		s.state, s.args = callArguments, jsonScanner{}
		return &CallEvent{Start: true, Index: s.index, Name: name}, true
	case callArguments:
		if s.pending == "" {
			return nil, false
		}
		n, done := s.args.scan(s.pending)
		piece := s.pending[:n]
		s.pending = s.pending[n:]
		if done {
			s.state = callTail
		}
		return &CallEvent{Index: s.index, Arguments: piece}, done
	case callTail:
		t := strings.TrimLeft(s.pending, " \t\r\n")
		if t == "" {
			return nil, false
		}
		if t[0] == callClose[0] {
			s.pending = t[1:]
			return nil, true
		}
		sep := strings.TrimSpace(callSeparator)
		if t[0] == sep[0] {
			s.pending = t[1:]
			s.index++
			s.state = callHead
			return nil, true
		}
		s.state = callContent
		return nil, true
	}
	return nil, false
}

// Whether a text opens with a literal: it does, it does so far (the text
// is shorter and could still), or it cannot.
const (
	litYes = iota
	litSoFar
	litNo
)

func opens(t, lit string) int {
	switch {
	case strings.HasPrefix(t, lit):
		return litYes
	case len(t) < len(lit) && strings.HasPrefix(lit, t):
		return litSoFar
	}
	return litNo
}

// jsonScanner finds where a JSON value ends, byte by byte.
type jsonScanner struct {
	depth    int
	inString bool
	escaped  bool
}

// scan reads text and returns how many of its bytes belong to the value,
// and whether the value ended there.
func (j *jsonScanner) scan(text string) (int, bool) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case j.escaped:
			j.escaped = false
		case j.inString:
			switch c {
			case '\\':
				j.escaped = true
			case '"':
				j.inString = false
			}
		case c == '"':
			j.inString = true
		case c == '{' || c == '[':
			j.depth++
		case c == '}' || c == ']':
			j.depth--
			if j.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(text), false
}
