package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
)

// Tensor is a tensor to write: its description and a source of its bytes.
type Tensor struct {
	Name string
	Type TensorType
	// Shape lists the dimensions fastest-varying first, as ggml's ne does:
	// a matrix of out rows of in weights is {in, out}.
	Shape []uint64
	// Data writes exactly the tensor's Type.Size(Shape) bytes. Tensors are
	// written concurrently, each Data from its own goroutine.
	Data io.WriterTo
}

// Write writes a GGUF file to w: the metadata in the order given, then the
// tensors in the order given, each at an offset aligned to general.alignment
// (DefaultAlignment unless meta sets it), padded with zeros.
//
// The tensors are written in parallel, one per core at a time, each through
// its own offset into w (parallel WriteAt calls to disjoint ranges, as
// io.WriterAt allows and an *os.File serves), so a model far larger than
// memory streams out.
func Write(w io.WriterAt, meta []KV, tensors []Tensor) error {
	align := uint64(DefaultAlignment)
	seen := make(map[string]bool, len(meta))
	var head bytes.Buffer
	head.WriteString(Magic)
	le := binary.LittleEndian
	head.Write(le.AppendUint32(nil, Version))
	head.Write(le.AppendUint64(nil, uint64(len(tensors))))
	head.Write(le.AppendUint64(nil, uint64(len(meta))))
	for _, kv := range meta {
		if kv.Key == "" {
			return fmt.Errorf("write gguf: a metadata key is empty")
		}
		if seen[kv.Key] {
			return fmt.Errorf("write gguf: metadata key %s appears twice", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == "general.alignment" {
			a, ok := kv.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return fmt.Errorf("write gguf: general.alignment is %v (%T), want a power of two as a uint32", kv.Value, kv.Value)
			}
			align = uint64(a)
		}
		head.Write(appendString(nil, kv.Key))
		b, err := appendValue(nil, reflect.ValueOf(kv.Value), true)
		if err != nil {
			return fmt.Errorf("write gguf: metadata %s: %w", kv.Key, err)
		}
		head.Write(b)
	}

	offsets := make([]uint64, len(tensors))
	sizes := make([]uint64, len(tensors))
	names := make(map[string]bool, len(tensors))
	var off uint64
	for i, t := range tensors {
		if t.Name == "" || len(t.Name) >= maxNameLen {
			return fmt.Errorf("write gguf: tensor name %q: want 1 to %d bytes", t.Name, maxNameLen-1)
		}
		if names[t.Name] {
			return fmt.Errorf("write gguf: tensor %s appears twice", t.Name)
		}
		names[t.Name] = true
		if t.Data == nil {
			return fmt.Errorf("write gguf: tensor %s has no data", t.Name)
		}
		size, err := t.Type.Size(t.Shape)
		if err != nil {
			return fmt.Errorf("write gguf: tensor %s: %w", t.Name, err)
		}
		offsets[i], sizes[i] = off, size
		off = pad(off+size, align)

		head.Write(appendString(nil, t.Name))
		head.Write(le.AppendUint32(nil, uint32(len(t.Shape))))
		for _, d := range t.Shape {
			head.Write(le.AppendUint64(nil, d))
		}
		head.Write(le.AppendUint32(nil, uint32(t.Type)))
		head.Write(le.AppendUint64(nil, offsets[i]))
	}
	dataStart := pad(uint64(head.Len()), align)
	head.Write(make([]byte, dataStart-uint64(head.Len())))
	if _, err := w.WriteAt(head.Bytes(), 0); err != nil {
		return fmt.Errorf("write gguf: %w", err)
	}

	// One worker per core takes the next tensor: each draws and encodes its
	// weights a chunk at a time, so memory stays at a few chunks per core.
	// After a failure no new tensor starts: the file is lost anyway.
	var mu sync.Mutex
	var failed error
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(1, len(tensors))) {
		wg.Go(func() {
			for i := range next {
				if err := writeTensor(w, tensors[i], int64(dataStart+offsets[i]), sizes[i], align); err != nil {
					mu.Lock()
					failed = cmpOr(failed, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range tensors {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if failed != nil {
		return fmt.Errorf("write gguf: %w", failed)
	}
	return nil
}

// cmpOr is the first error that is not nil.
func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// writeTensor writes t's data at off, checks it wrote size bytes, and pads
// it to the alignment, as llama.cpp's own writer does after every tensor.
func writeTensor(w io.WriterAt, t Tensor, off int64, size, align uint64) error {
	cw := &countingWriter{w: io.NewOffsetWriter(w, off)}
	if _, err := t.Data.WriteTo(cw); err != nil {
		return fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	if uint64(cw.n) != size {
		return fmt.Errorf("tensor %s: wrote %d bytes, want %d (type %s, shape %v)", t.Name, cw.n, size, t.Type, t.Shape)
	}
	if p := pad(size, align) - size; p > 0 {
		if _, err := w.WriteAt(make([]byte, p), off+int64(size)); err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
	}
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// valueType maps a Go type to the metadata type that stores it. Go's int and
// uint are refused: their width is the machine's, the file's must be chosen.
func valueType(t reflect.Type) (ValueType, error) {
	if t == nil {
		return 0, fmt.Errorf("a nil value")
	}
	switch t.Kind() {
	case reflect.Uint8:
		return TypeUint8, nil
	case reflect.Int8:
		return TypeInt8, nil
	case reflect.Uint16:
		return TypeUint16, nil
	case reflect.Int16:
		return TypeInt16, nil
	case reflect.Uint32:
		return TypeUint32, nil
	case reflect.Int32:
		return TypeInt32, nil
	case reflect.Float32:
		return TypeFloat32, nil
	case reflect.Bool:
		return TypeBool, nil
	case reflect.String:
		return TypeString, nil
	case reflect.Slice, reflect.Array:
		return TypeArray, nil
	case reflect.Uint64:
		return TypeUint64, nil
	case reflect.Int64:
		return TypeInt64, nil
	case reflect.Float64:
		return TypeFloat64, nil
	case reflect.Int, reflect.Uint:
		return 0, fmt.Errorf("a Go %s has no fixed width: use a sized type such as int32 or uint32", t)
	}
	return 0, fmt.Errorf("a Go %s is no GGUF type", t)
}

// appendValue appends v, with its type first when typed (every value but
// an array's elements, whose type the array states once).
func appendValue(b []byte, v reflect.Value, typed bool) ([]byte, error) {
	if !v.IsValid() {
		return nil, fmt.Errorf("a nil value")
	}
	t, err := valueType(v.Type())
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if typed {
		b = le.AppendUint32(b, uint32(t))
	}
	switch t {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return appendUint(b, v.Uint(), t.size()), nil
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		return appendUint(b, uint64(v.Int()), t.size()), nil
	case TypeFloat32:
		return le.AppendUint32(b, math.Float32bits(float32(v.Float()))), nil
	case TypeFloat64:
		return le.AppendUint64(b, math.Float64bits(v.Float())), nil
	case TypeBool:
		if v.Bool() {
			return append(b, 1), nil
		}
		return append(b, 0), nil
	case TypeString:
		return appendString(b, v.String()), nil
	}
	et, err := valueType(v.Type().Elem())
	if err != nil {
		return nil, fmt.Errorf("array of %w", err)
	}
	b = le.AppendUint32(b, uint32(et))
	b = le.AppendUint64(b, uint64(v.Len()))
	// An element that is itself an array states its own element type and
	// length (as gguf-py writes them), not the type ARRAY again.
	for i := range v.Len() {
		if b, err = appendValue(b, v.Index(i), false); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func appendUint(b []byte, u uint64, size int) []byte {
	for i := range size {
		b = append(b, byte(u>>(8*i)))
	}
	return b
}

// WriteFile writes a GGUF file to path through a temporary file in the
// same folder, renamed last, so that a reader never sees half a model and
// a failed write leaves nothing behind.
func WriteFile(path string, meta []KV, tensors []Tensor) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, ".part-*.gguf")
	if err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	// CreateTemp makes the file 0600; a model is read by other users.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := Write(tmp, meta, tensors); err != nil {
		tmp.Close()
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf %s: %w", path, err)
	}
	return nil
}
