// Package onnxproto writes ONNX model files: the few messages of onnx.proto
// that a small inference graph needs, encoded by hand with protowire. It
// exists so that genq can produce its own tiny test models without Python.
// Field numbers are those of onnx/onnx.proto (IR version 8).
package onnxproto

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataType is TensorProto.DataType.
type DataType int32

const (
	Float   DataType = 1
	Uint8   DataType = 2
	Int32   DataType = 6
	Int64   DataType = 7
	Float16 DataType = 10
)

// IRVersion 8 is the IR that goes with opset 17 and is read by every ONNX
// Runtime since 1.13.
const IRVersion = 8

// Model is a ModelProto with one graph and the default-domain opset.
type Model struct {
	Producer string
	Opset    int64
	Graph    Graph
}

// Graph is a GraphProto.
type Graph struct {
	Name         string
	Nodes        []Node
	Initializers []Tensor
	Inputs       []ValueInfo
	Outputs      []ValueInfo
}

// Node is a NodeProto of the default domain.
type Node struct {
	Name    string
	OpType  string
	Inputs  []string
	Outputs []string
	Attrs   []Attr
}

// Attr is an AttributeProto: set exactly one of the value fields.
type Attr struct {
	Name   string
	Int    *int64
	Float  *float32
	String *string
	Ints   []int64
}

// IntAttr, FloatAttr, StringAttr and IntsAttr build attributes.
func IntAttr(name string, v int64) Attr     { return Attr{Name: name, Int: &v} }
func FloatAttr(name string, v float32) Attr { return Attr{Name: name, Float: &v} }
func StringAttr(name string, v string) Attr { return Attr{Name: name, String: &v} }
func IntsAttr(name string, v ...int64) Attr { return Attr{Name: name, Ints: v} }

// Tensor is a TensorProto holding its data as raw little-endian bytes.
type Tensor struct {
	Name string
	Type DataType
	Dims []int64
	Raw  []byte
}

// Dim is one dimension of a ValueInfo: a fixed size, or a named free one
// (Param) such as "batch_size".
type Dim struct {
	Value int64
	Param string
}

// ValueInfo is a ValueInfoProto of tensor type.
type ValueInfo struct {
	Name string
	Type DataType
	Dims []Dim
}

// Marshal encodes the model as the bytes of a .onnx file.
func (m Model) Marshal() []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType) // ir_version
	b = protowire.AppendVarint(b, IRVersion)
	b = appendString(b, 2, m.Producer) // producer_name
	b = appendMessage(b, 7, m.Graph.marshal())
	var opset []byte
	opset = appendString(opset, 1, "")
	opset = protowire.AppendTag(opset, 2, protowire.VarintType)
	opset = protowire.AppendVarint(opset, uint64(m.Opset))
	b = appendMessage(b, 8, opset) // opset_import
	return b
}

func (g Graph) marshal() []byte {
	var b []byte
	for _, n := range g.Nodes {
		b = appendMessage(b, 1, n.marshal())
	}
	b = appendString(b, 2, g.Name)
	for _, t := range g.Initializers {
		b = appendMessage(b, 5, t.marshal())
	}
	for _, v := range g.Inputs {
		b = appendMessage(b, 11, v.marshal())
	}
	for _, v := range g.Outputs {
		b = appendMessage(b, 12, v.marshal())
	}
	return b
}

func (n Node) marshal() []byte {
	var b []byte
	for _, in := range n.Inputs {
		b = appendString(b, 1, in)
	}
	for _, out := range n.Outputs {
		b = appendString(b, 2, out)
	}
	b = appendString(b, 3, n.Name)
	b = appendString(b, 4, n.OpType)
	for _, a := range n.Attrs {
		b = appendMessage(b, 5, a.marshal())
	}
	return b
}

// AttributeProto.AttributeType values.
const (
	attrFloat  = 1
	attrInt    = 2
	attrString = 3
	attrInts   = 7
)

func (a Attr) marshal() []byte {
	var b []byte
	b = appendString(b, 1, a.Name)
	var kind uint64
	switch {
	case a.Float != nil:
		kind = attrFloat
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(*a.Float))
	case a.Int != nil:
		kind = attrInt
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(*a.Int))
	case a.String != nil:
		kind = attrString
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, []byte(*a.String))
	default:
		kind = attrInts
		var packed []byte
		for _, v := range a.Ints {
			packed = protowire.AppendVarint(packed, uint64(v))
		}
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	b = protowire.AppendTag(b, 20, protowire.VarintType)
	return protowire.AppendVarint(b, kind)
}

func (t Tensor) marshal() []byte {
	var b []byte
	if len(t.Dims) > 0 {
		var packed []byte
		for _, d := range t.Dims {
			packed = protowire.AppendVarint(packed, uint64(d))
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(t.Type))
	b = appendString(b, 8, t.Name)
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	return protowire.AppendBytes(b, t.Raw)
}

func (v ValueInfo) marshal() []byte {
	var shape []byte
	for _, d := range v.Dims {
		var dim []byte
		if d.Param != "" {
			dim = appendString(dim, 2, d.Param)
		} else {
			dim = protowire.AppendTag(dim, 1, protowire.VarintType)
			dim = protowire.AppendVarint(dim, uint64(d.Value))
		}
		shape = appendMessage(shape, 1, dim)
	}
	var tensorType []byte
	tensorType = protowire.AppendTag(tensorType, 1, protowire.VarintType)
	tensorType = protowire.AppendVarint(tensorType, uint64(v.Type))
	tensorType = appendMessage(tensorType, 2, shape)
	var typ []byte
	typ = appendMessage(typ, 1, tensorType)

	var b []byte
	b = appendString(b, 1, v.Name)
	return appendMessage(b, 2, typ)
}

func appendString(b []byte, field protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// appendMessage writes an embedded message, even an empty one: an empty
// shape still says "a tensor of rank 0", unlike an absent one.
func appendMessage(b []byte, field protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, field, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}
