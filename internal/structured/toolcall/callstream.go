package toolcall

import (
	"strings"

	"github.com/genq/genq/internal/genq"
)

// CallEvent is one thing a streamed answer says, read as it comes: a piece
// of content, the start of call Index (its name), a piece of that call's
// arguments, or the reasoning block that led the calls. The arguments'
// pieces join into the call's arguments as ToolFormat.Parse reads them
// from the whole answer.
type CallEvent struct {
	Content   string
	Start     bool
	Index     int
	Name      string
	Arguments string
	// Reasoning is the text before the calls, a leading <think>…</think>
	// block with the whitespace around it, given once the calls begin; an
	// answer in prose keeps its reasoning in its content.
	Reasoning string
}

// Join plays a stream's events back into content and calls, as a client
// joins deltas: the whole answer's content and its calls as Parse reads
// them.
func Join(events []CallEvent) (content string, calls []genq.ToolCallFunction) {
	var b strings.Builder
	for _, e := range events {
		b.WriteString(e.Content)
		if e.Start {
			calls = append(calls, genq.ToolCallFunction{Name: e.Name})
		}
		if e.Arguments != "" {
			calls[e.Index].Arguments += e.Arguments
		}
	}
	return b.String(), calls
}

// CallStream splits a streamed answer into content and tool calls. It does
// not need to know the model: it tells the format by the text the calls
// open with (each ToolFormat's Opener), after whitespace and a leading
// reasoning block, and holds back only what it cannot tell yet: a
// reasoning block, a text that may still become an opener, a call's head
// until its name is whole. Text that is not calls goes out as content, so
// nothing the model wrote is lost.
type CallStream struct {
	phase   streamPhase
	started bool // a reasoning block or an opener was seen: no reasoning block may open now
	pending string
	lead    string // what came before the calls, held back
	format  ToolFormat
	l       Layout
	index   int
	tail    tailStage
	args    jsonScanner
}

type streamPhase int

const (
	streamOpening   streamPhase = iota // whitespace, a reasoning block's start or an opener's, so far
	streamThinking                     // inside a leading reasoning block
	streamHead                         // a call's text up to its arguments
	streamArguments                    // inside the arguments' object
	streamTail                         // after the arguments: the call's end, then the next call's separator or the calls' close
	streamEnd                          // after the calls' close
	streamContent                      // not calls: everything is content
)

// tailStage is where streamTail stands.
type tailStage int

const (
	tailID    tailStage = iota // Mistral: an optional id
	tailClose                  // the call's closing text
	tailNext                   // the separator before the next call, or the calls' close
)

// NewCallStream starts reading an answer. Lazy is accepted for callers
// that know whether the answer had to be calls; the reading is the same,
// since the worker's grammar decides what the text is.
func NewCallStream(lazy bool) *CallStream {
	return &CallStream{}
}

// Calls reports whether the answer turned out to be calls.
func (s *CallStream) Calls() bool { return s.phase >= streamHead && s.phase <= streamEnd }

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
	switch s.phase {
	case streamOpening, streamThinking, streamContent:
		rest = s.lead + rest
		s.lead = ""
		if rest != "" {
			return []CallEvent{{Content: rest}}
		}
	case streamArguments:
		if rest != "" {
			return []CallEvent{{Index: s.index, Arguments: rest}}
		}
	}
	return nil
}

// toContent gives up on calls: what is held and what follows is content.
func (s *CallStream) toContent() (*CallEvent, bool) {
	s.phase = streamContent
	return nil, true
}

// step moves on by what pending allows: an event, and whether another
// step may move further.
func (s *CallStream) step() (*CallEvent, bool) {
	switch s.phase {
	case streamOpening:
		return s.opening()
	case streamThinking:
		i := strings.Index(s.pending, ThinkClose)
		if i < 0 {
			return nil, false
		}
		n := i + len(ThinkClose)
		s.lead, s.pending = s.lead+s.pending[:n], s.pending[n:]
		s.phase = streamOpening
		return nil, true
	case streamContent:
		text := s.lead + s.pending
		s.lead, s.pending = "", ""
		if text == "" {
			return nil, false
		}
		return &CallEvent{Content: text}, false
	case streamHead:
		return s.head()
	case streamArguments:
		if s.pending == "" {
			return nil, false
		}
		n, done := s.args.scan(s.pending)
		piece := s.pending[:n]
		s.pending = s.pending[n:]
		if done {
			s.phase, s.tail = streamTail, tailID
		}
		return &CallEvent{Index: s.index, Arguments: piece}, done
	case streamTail:
		return s.callTail()
	case streamEnd:
		if strings.TrimLeft(s.pending, " \t\r\n") != "" {
			return s.toContent()
		}
		return nil, false
	}
	return nil, false
}

// opening reads the answer's start: whitespace, a reasoning block, then the
// opener that tells the calls' format, or anything else, which is prose.
func (s *CallStream) opening() (*CallEvent, bool) {
	t := trimLeftWS(s.pending)
	if t == "" {
		return nil, false
	}
	ws := s.pending[:len(s.pending)-len(t)]
	wait := false
	if !s.started {
		switch opens(t, ThinkOpen) {
		case litYes:
			s.started = true
			s.lead += ws + ThinkOpen
			s.pending = t[len(ThinkOpen):]
			s.phase = streamThinking
			return nil, true
		case litSoFar:
			wait = true
		}
	}
	for _, f := range ToolFormats() {
		switch opens(t, f.Opener()) {
		case litYes:
			s.started = true
			s.format, s.l = f, f.Layout()
			s.lead += ws
			s.pending = t
			s.phase = streamHead
			var ev *CallEvent
			if strings.TrimSpace(s.lead) != "" {
				ev = &CallEvent{Reasoning: s.lead}
			}
			s.lead = ""
			return ev, true
		case litSoFar:
			wait = true
		}
	}
	if wait {
		return nil, false
	}
	return s.toContent()
}

// head reads a call's fixed text, its name and the text before its
// arguments, and gives the call's start.
func (s *CallStream) head() (*CallEvent, bool) {
	lit := s.l.Head
	if s.index == 0 {
		lit = s.l.Open + lit
	}
	s.pending = trimLeftWS(s.pending)
	n, st := matchLoose(s.pending, lit)
	switch st {
	case litNo:
		return s.toContent()
	case litSoFar:
		return nil, false
	}
	// The name ends where the text before the arguments begins: a JSON
	// string's closing quote, harmony's space before <|constrain|>.
	end := s.l.Args[:1]
	name, rest, ok := strings.Cut(s.pending[n:], end)
	if !ok {
		return nil, false
	}
	after := end + rest
	m, st := matchLoose(after, s.l.Args)
	switch st {
	case litNo:
		return s.toContent()
	case litSoFar:
		return nil, false
	}
	s.pending = trimLeftWS(after[m:])
	s.phase, s.args = streamArguments, jsonScanner{}
	return &CallEvent{Start: true, Index: s.index, Name: name}, true
}

// callTail reads what follows a call's arguments: Mistral's id, the call's
// closing text, then the separator and the next call, or the calls' close.
func (s *CallStream) callTail() (*CallEvent, bool) {
	switch s.tail {
	case tailID:
		if !s.l.ID {
			s.tail = tailClose
			return nil, true
		}
		n, st := matchLoose(s.pending, MistralIDHead)
		switch st {
		case litSoFar:
			return nil, false
		case litNo:
			s.tail = tailClose
			return nil, true
		}
		_, rest, ok := strings.Cut(s.pending[n:], `"`)
		if !ok {
			return nil, false
		}
		s.pending, s.tail = rest, tailClose
		return nil, true
	case tailClose:
		n, st := matchLoose(s.pending, s.l.Tail)
		switch st {
		case litNo:
			return s.toContent()
		case litSoFar:
			return nil, false
		}
		s.pending, s.tail = s.pending[n:], tailNext
		return nil, true
	}
	t := trimLeftWS(s.pending)
	if t == "" {
		return nil, false
	}
	if s.l.Close != "" && strings.HasPrefix(t, s.l.Close) {
		s.pending, s.phase = t[len(s.l.Close):], streamEnd
		return nil, true
	}
	if sep := strings.TrimSpace(s.l.Sep); sep != "" {
		switch opens(t, sep) {
		case litSoFar: // harmony's is longer than a byte
			return nil, false
		case litNo:
			return s.toContent()
		}
		t = t[len(sep):]
	}
	s.pending = t
	s.index++
	s.phase = streamHead
	return nil, true
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

// matchLoose matches lit at the start of t, a run of whitespace in t
// matching each whitespace byte of lit (cutLoose's rule), and returns the
// bytes of t it took. A text that ends inside lit, or inside one of its
// runs of whitespace, matches so far.
func matchLoose(t, lit string) (int, int) {
	i := 0
	for j := 0; j < len(lit); j++ {
		if IsSpace(lit[j]) {
			for i < len(t) && IsSpace(t[i]) {
				i++
			}
			if i == len(t) {
				return i, litSoFar // more whitespace may come
			}
			continue
		}
		if i == len(t) {
			return i, litSoFar
		}
		if t[i] != lit[j] {
			return i, litNo
		}
		i++
	}
	return i, litYes
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
