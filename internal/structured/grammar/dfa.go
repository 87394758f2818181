package grammar

import (
	"encoding/binary"
	"unsafe"
)

// A walk of the vocabulary steps the same sets of configs over the same
// bytes again and again: below most trie nodes a string's character
// stands where it stood one byte up, and each step was a closure over the
// NFA (marks, frames, appends; its cost is in docs/text.md). The stepper
// keeps the sets it met as the states of a DFA,
// built lazily, and each state's step over a byte once: a walk then costs
// a table look-up per trie node, and a closure per new state and byte.
// The sets' frames are the stepper's, interned, so the DFA serves every
// walk of the stepper; past maxDFAStates it starts over, between walks.

// maxDFAStates bounds a stepper's DFA: each state holds a transition per
// byte and its configs (the memory it comes to is in docs/text.md).
const maxDFAStates = 1024

// Transitions are coded in a uint32: 0 not worked out yet, dfaDead no
// config takes the byte, else the next state's index+2 shifted left once,
// the low bit set where the step escaped (popped the bottom frame).
const dfaDead = 1

type dfaState struct {
	configs []config
	next    [256]uint32
}

type dfa struct {
	states []*dfaState
	byKey  map[string]int32
	key    []byte
	spare  []*dfaState // states of a DFA started over, for reuse
}

// reset starts the DFA over when it is full; call it between walks only,
// as walks hold its states' configs.
func (d *dfa) reset() {
	if len(d.states) < maxDFAStates {
		return
	}
	d.spare = append(d.spare[:0], d.states...)
	d.states = d.states[:0]
	clear(d.byKey)
}

// state is the index of the state of configs cur, added if new; -1 once
// the DFA is full.
func (d *dfa) state(cur []config) int32 {
	d.key = d.key[:0]
	for _, c := range cur {
		d.key = binary.LittleEndian.AppendUint32(d.key, uint32(c.node))
		// Frames are interned and held by the stepper: a frame's address
		// names it for as long as the DFA lives.
		d.key = binary.LittleEndian.AppendUint64(d.key, uint64(uintptr(unsafe.Pointer(c.st))))
	}
	if id, ok := d.byKey[string(d.key)]; ok {
		return id
	}
	if len(d.states) >= maxDFAStates {
		return -1
	}
	var s *dfaState
	if n := len(d.spare); n > 0 {
		s, d.spare = d.spare[n-1], d.spare[:n-1]
		s.configs = append(s.configs[:0], cur...)
		clear(s.next[:])
	} else {
		s = &dfaState{configs: append([]config(nil), cur...)}
	}
	if d.byKey == nil {
		d.byKey = map[string]int32{}
	}
	id := int32(len(d.states))
	d.states = append(d.states, s)
	d.byKey[string(d.key)] = id
	return id
}

// trans steps state id over byte c: the next state (-1 when the DFA is
// full: next holds its configs in buf then), whether any config took c
// and whether the step escaped.
func (st *stepper) trans(id int32, c byte, buf []config) (next []config, nid int32, took, escaped bool) {
	d := &st.dfa
	s := d.states[id]
	if code := s.next[c]; code != 0 {
		if code == dfaDead {
			return nil, -1, false, false
		}
		nid = int32(code>>1) - 2
		return d.states[nid].configs, nid, true, code&1 != 0
	}
	next, took = st.step(buf, s.configs, c)
	escaped = st.escaped
	if !took {
		s.next[c] = dfaDead
		return nil, -1, false, false
	}
	nid = d.state(next)
	if nid < 0 {
		return next, -1, true, escaped
	}
	code := uint32(nid+2) << 1
	if escaped {
		code |= 1
	}
	s.next[c] = code
	return d.states[nid].configs, nid, true, escaped
}
