package tensor

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// OpTime is the time a backend spent in one kind of operation, summed
// over the graphs it computed while profiling: the operation, its
// result's and its operands' shapes and element types.
type OpTime struct {
	Op    string        `json:"op"`
	Calls int           `json:"calls"`
	Time  time.Duration `json:"ns"`
}

// Profile makes the backend compute each graph one operation at a time,
// timing each, until it is called with false; Profiled returns the sums.
// Each operation then waits for the device, and the CUDA backend can
// neither fuse operations nor replay a captured graph, so the sum is more
// than the graph takes at full speed; what it gives is the share of each
// operation, for finding where the time goes.
func (be *Backend) Profile(on bool) {
	if !on {
		be.profile = nil
		return
	}
	be.profile = map[string]*OpTime{}
}

// Profiled is what the backend has timed since Profile(true), the most
// time first.
func (be *Backend) Profiled() []OpTime {
	var out []OpTime
	for _, t := range be.profile {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b OpTime) int { return int(b.Time - a.Time) })
	return out
}

// computeProfiled computes g's nodes one at a time, in order, each a
// graph of its own over the memory the whole graph was laid out in.
func (be *Backend) computeProfiled(g unsafe.Pointer) error {
	a := be.a
	n := a.graphNodes(g)
	ctx := a.newContext(uintptr(n) * (a.graphOverhead(1, false) + 64))
	defer a.free(ctx)
	for i := range n {
		node := a.graphNode(g, i)
		one := a.newGraphCustom(ctx, 1, false)
		a.graphAddNode(one, node)
		start := time.Now()
		if status := a.graphCompute(be.backendFor(node), one); status != 0 {
			return fmt.Errorf("ggml: compute failed at %s (status %d)", a.opDesc(node), status)
		}
		key := be.opKey(node)
		t := be.profile[key]
		if t == nil {
			t = &OpTime{Op: key}
			be.profile[key] = t
		}
		t.Calls++
		t.Time += time.Since(start)
	}
	return nil
}

// node is struct ggml_tensor up to its operands (ggml.h): op at byte 80,
// then 64 bytes of parameters and the flags, then the operands.
type node struct {
	header
	op     int32
	params [16]int32
	flags  int32
	src    [10]unsafe.Pointer
}

// typeName is ggml's element type t as the profile names it.
func typeName(t int32) string {
	switch t {
	case typeF32:
		return "f32"
	case typeF16:
		return "f16"
	case typeI32:
		return "i32"
	case typeBF16:
		return "bf16"
	}
	return fmt.Sprintf("type%d", t)
}

// opKey names an operation by what it is and on what:
// "MUL_MAT f32[1536,4096,2] ← f16[1536,1536] f32[1536,4096,2]".
func (be *Backend) opKey(t unsafe.Pointer) string {
	shape := func(t unsafe.Pointer) string {
		h := (*header)(t)
		ne := h.ne[:]
		for len(ne) > 1 && ne[len(ne)-1] == 1 {
			ne = ne[:len(ne)-1]
		}
		s := make([]string, len(ne))
		for i, n := range ne {
			s[i] = fmt.Sprint(n)
		}
		return typeName(h.typ) + "[" + strings.Join(s, ",") + "]"
	}
	var b strings.Builder
	b.WriteString(be.a.opDesc(t) + " " + shape(t) + " ←")
	for _, s := range (*node)(t).src[:3] {
		if s != nil {
			b.WriteString(" " + shape(s))
		}
	}
	return b.String()
}
