package onnxproto

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// fields decodes one message level into field number → raw values.
func fields(t *testing.T, b []byte) map[protowire.Number][][]byte {
	t.Helper()
	out := map[protowire.Number][][]byte{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatalf("bad tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		var v []byte
		switch typ {
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			var x uint64
			x, n = protowire.ConsumeVarint(b)
			v = protowire.AppendVarint(nil, x)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = protowire.AppendFixed32(nil, x)
		default:
			t.Fatalf("unexpected wire type %v", typ)
		}
		if n < 0 {
			t.Fatalf("bad value of field %d: %v", num, protowire.ParseError(n))
		}
		out[num] = append(out[num], v)
		b = b[n:]
	}
	return out
}

func varint(t *testing.T, b []byte) uint64 {
	t.Helper()
	v, n := protowire.ConsumeVarint(b)
	if n < 0 {
		t.Fatal("bad varint")
	}
	return v
}

// The field numbers checked here are those of onnx.proto; ONNX Runtime
// loading the tiny export (internal/onnx tests) checks the rest.
func TestMarshalFieldNumbers(t *testing.T) {
	m := Model{Producer: "test", Opset: 17, Graph: Graph{
		Name: "g",
		Nodes: []Node{{Name: "n", OpType: "Relu", Inputs: []string{"x"}, Outputs: []string{"y"},
			Attrs: []Attr{IntAttr("axis", -1), IntsAttr("axes", 1, 2)}}},
		Initializers: []Tensor{{Name: "w", Type: Float16, Dims: []int64{2}, Raw: []byte{0, 0x3c, 0, 0x40}}},
		Inputs:       []ValueInfo{{Name: "x", Type: Float, Dims: []Dim{{Param: "batch"}, {Value: 3}}}},
		Outputs:      []ValueInfo{{Name: "y", Type: Float}},
	}}
	model := fields(t, m.Marshal())
	if got := varint(t, model[1][0]); got != IRVersion {
		t.Errorf("ir_version %d, want %d", got, IRVersion)
	}
	if got := string(model[2][0]); got != "test" {
		t.Errorf("producer_name %q", got)
	}
	opset := fields(t, model[8][0])
	if got := varint(t, opset[2][0]); got != 17 {
		t.Errorf("opset version %d, want 17", got)
	}

	graph := fields(t, model[7][0])
	node := fields(t, graph[1][0])
	if string(node[4][0]) != "Relu" || string(node[1][0]) != "x" || string(node[2][0]) != "y" {
		t.Errorf("node fields %q", node)
	}
	axis := fields(t, node[5][0])
	if string(axis[1][0]) != "axis" || int64(varint(t, axis[3][0])) != -1 || varint(t, axis[20][0]) != attrInt {
		t.Errorf("int attribute %q", axis)
	}
	axes := fields(t, node[5][1])
	if varint(t, axes[20][0]) != attrInts || len(axes[8]) != 1 {
		t.Errorf("ints attribute %q", axes)
	}

	init := fields(t, graph[5][0])
	if DataType(varint(t, init[2][0])) != Float16 || string(init[8][0]) != "w" || len(init[9][0]) != 4 {
		t.Errorf("initializer %q", init)
	}

	in := fields(t, graph[11][0])
	tensorType := fields(t, fields(t, in[2][0])[1][0])
	if DataType(varint(t, tensorType[1][0])) != Float {
		t.Errorf("input elem_type %q", tensorType)
	}
	dims := fields(t, tensorType[2][0])[1]
	if len(dims) != 2 || string(fields(t, dims[0])[2][0]) != "batch" || varint(t, fields(t, dims[1])[1][0]) != 3 {
		t.Errorf("input dims %q", dims)
	}
	if len(graph[12]) != 1 {
		t.Errorf("%d outputs, want 1", len(graph[12]))
	}
}
