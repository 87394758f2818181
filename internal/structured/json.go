package structured

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"strconv"

	"github.com/genq/genq/internal/genq"
)

// value is a parsed JSON value that keeps the order of object members: a
// schema's property order is the order the answer writes them in.
type value struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	obj  []member
	arr  []*value
	str  string
	num  json.Number
	b    bool
}

type member struct {
	key string
	val *value
}

func (v *value) get(key string) *value {
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// rat is v's number exactly, and false when v holds none big.Rat reads.
func (v *value) rat() (*big.Rat, bool) {
	return new(big.Rat).SetString(v.num.String())
}

// parseJSON parses one JSON document, keeping object member order.
func parseJSON(data []byte) (*value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, genq.Errorf(genq.Invalid, "the schema is not one JSON value: something follows it")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (*value, error) {
	if depth > maxSchemaDepth {
		return nil, genq.Errorf(genq.Invalid, "the schema nests deeper than %d levels", maxSchemaDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, genq.WrapError(genq.Invalid, err, "the schema is not valid JSON: "+err.Error())
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &value{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, genq.WrapError(genq.Invalid, err, "the schema is not valid JSON: "+err.Error())
				}
				k := kt.(string)
				if v.get(k) != nil {
					return nil, genq.Errorf(genq.Invalid, "the schema repeats the key %q in one object", k)
				}
				mv, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, member{k, mv})
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := &value{kind: 'a'}
			for dec.More() {
				ev, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, ev)
			}
			_, err := dec.Token()
			return v, err
		}
	case string:
		return &value{kind: 's', str: t}, nil
	case json.Number:
		return &value{kind: 'n', num: t}, nil
	case bool:
		return &value{kind: 'b', b: t}, nil
	case nil:
		return &value{kind: 'z'}, nil
	}
	return nil, genq.Errorf(genq.Invalid, "the schema is not valid JSON")
}

// encode writes v as compact JSON, members in order.
func (v *value) encode(buf *bytes.Buffer) {
	switch v.kind {
	case 'o':
		buf.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, m.key)
			buf.WriteByte(':')
			m.val.encode(buf)
		}
		buf.WriteByte('}')
	case 'a':
		buf.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				buf.WriteByte(',')
			}
			e.encode(buf)
		}
		buf.WriteByte(']')
	case 's':
		writeString(buf, v.str)
	case 'n':
		buf.WriteString(v.num.String())
	case 'b':
		buf.WriteString(strconv.FormatBool(v.b))
	case 'z':
		buf.WriteString("null")
	}
}

func writeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a Go string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// isType reports whether v is of a schema's "type" t; a number with no
// fraction is an integer as well.
func (v *value) isType(t string) bool {
	switch t {
	case "object":
		return v.kind == 'o'
	case "array":
		return v.kind == 'a'
	case "string":
		return v.kind == 's'
	case "boolean":
		return v.kind == 'b'
	case "null":
		return v.kind == 'z'
	case "number":
		return v.kind == 'n'
	case "integer":
		if v.kind != 'n' {
			return false
		}
		f, err := v.num.Float64()
		return err == nil && f == float64(int64(f))
	}
	return false
}
