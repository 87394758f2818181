package onnx

import (
	"fmt"
	"reflect"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/genq/genq/internal/onnx/half"
)

// newFloatTensor makes an input of the element type the model declares:
// fp16 exports get fp16 tensors.
func newFloatTensor(typ ort.TensorElementDataType, shape ort.Shape, data []float32) (ort.Value, error) {
	switch typ {
	case ort.TensorElementDataTypeFloat:
		return ort.NewTensor(shape, data)
	case ort.TensorElementDataTypeFloat16:
		return ort.NewCustomDataTensor(shape, half.Encode(data), typ)
	case ort.TensorElementDataTypeInt64: // integer timesteps of older exports
		ints := make([]int64, len(data))
		for i, f := range data {
			ints[i] = int64(f)
		}
		return ort.NewTensor(shape, ints)
	}
	return nil, fmt.Errorf("cannot feed a %v tensor", typ)
}

// newScalar makes a rank-0 input. onnxruntime_go has no rank-0 tensor of
// custom type, so an fp16 scalar cannot be made (Open refuses such models).
func newScalar(typ ort.TensorElementDataType, v float32) (ort.Value, error) {
	switch typ {
	case ort.TensorElementDataTypeFloat:
		return ort.NewScalar(v)
	case ort.TensorElementDataTypeDouble:
		return ort.NewScalar(float64(v))
	case ort.TensorElementDataTypeInt64:
		return ort.NewScalar(int64(v))
	}
	return nil, fmt.Errorf("cannot feed a %v scalar", typ)
}

// newEmptyTensor allocates a float output of the given element type.
func newEmptyTensor(typ ort.TensorElementDataType, shape ort.Shape) (ort.Value, error) {
	switch typ {
	case ort.TensorElementDataTypeFloat:
		return ort.NewEmptyTensor[float32](shape)
	case ort.TensorElementDataTypeFloat16:
		return ort.NewCustomDataTensor(shape, make([]byte, 2*shape.FlattenedSize()), typ)
	}
	return nil, fmt.Errorf("cannot read a %v output", typ)
}

// newIDTensor makes a token id input of the model's integer type.
func newIDTensor(typ ort.TensorElementDataType, shape ort.Shape, ids []int64) (ort.Value, error) {
	switch typ {
	case ort.TensorElementDataTypeInt64:
		return ort.NewTensor(shape, ids)
	case ort.TensorElementDataTypeInt32:
		narrow := make([]int32, len(ids))
		for i, id := range ids {
			narrow[i] = int32(id)
		}
		return ort.NewTensor(shape, narrow)
	}
	return nil, fmt.Errorf("cannot feed token ids as %v", typ)
}

// floatData reads a float output, widening fp16.
func floatData(v ort.Value) ([]float32, ort.Shape, error) {
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		return t.GetData(), t.GetShape(), nil
	case *ort.CustomDataTensor:
		if ort.TensorElementDataType(t.DataType()) == ort.TensorElementDataTypeFloat16 {
			return half.Decode(t.GetData()), t.GetShape(), nil
		}
	}
	return nil, nil, fmt.Errorf("output is %T, want a float32 or float16 tensor", v)
}

// destroyAll frees tensors, skipping outputs that were never allocated:
// nil, or a typed nil pointer left by a failed Run.
func destroyAll(vs []ort.Value) {
	for _, v := range vs {
		if v != nil && !reflect.ValueOf(v).IsNil() {
			v.Destroy()
		}
	}
}
