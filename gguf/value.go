package gguf

import (
	"errors"
	"fmt"
)

// ValueType is the type tag of a GGUF metadata value.
type ValueType uint32

// The 13 metadata value types of GGUF.
const (
	ValueUint8   ValueType = 0
	ValueInt8    ValueType = 1
	ValueUint16  ValueType = 2
	ValueInt16   ValueType = 3
	ValueUint32  ValueType = 4
	ValueInt32   ValueType = 5
	ValueFloat32 ValueType = 6
	ValueBool    ValueType = 7
	ValueString  ValueType = 8
	ValueArray   ValueType = 9
	ValueUint64  ValueType = 10
	ValueInt64   ValueType = 11
	ValueFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String returns the GGUF name of the value type.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("valuetype(%d)", uint32(t))
}

// size returns the encoded size of a scalar of type t, or 0 for strings,
// arrays and unknown types.
func (t ValueType) size() int {
	switch t {
	case ValueUint8, ValueInt8, ValueBool:
		return 1
	case ValueUint16, ValueInt16:
		return 2
	case ValueUint32, ValueInt32, ValueFloat32:
		return 4
	case ValueUint64, ValueInt64, ValueFloat64:
		return 8
	}
	return 0
}

// Array is a GGUF array value. Values holds a typed slice matching Type:
// []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64, or []Array for nested arrays.
type Array struct {
	Type   ValueType
	Values any
}

// Len returns the number of elements of the array.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// KV is one metadata key-value pair. Value holds the Go value of the GGUF
// type: uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
// uint64, int64, float64 or Array.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// ErrKeyNotFound is wrapped by the error of an accessor whose key is absent.
var ErrKeyNotFound = errors.New("key not found")

// KeyError is returned by the typed accessors: the key is missing or holds a
// value of another type.
type KeyError struct {
	Key  string
	Want string // the type the caller asked for
	Have string // the type in the file; empty when the key is missing
}

func (e *KeyError) Error() string {
	if e.Have == "" {
		return fmt.Sprintf("gguf: key %q not found (want %s)", e.Key, e.Want)
	}
	return fmt.Sprintf("gguf: key %q has type %s, want %s", e.Key, e.Have, e.Want)
}

// Unwrap returns ErrKeyNotFound for a missing key.
func (e *KeyError) Unwrap() error {
	if e.Have == "" {
		return ErrKeyNotFound
	}
	return nil
}

func typeName(kv KV) string {
	if a, ok := kv.Value.(Array); ok {
		return "array of " + a.Type.String()
	}
	return kv.Type.String()
}

// Get returns the pair stored under key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.index[key]
	if !ok {
		return KV{}, false
	}
	return f.KV[i], true
}

// Has reports whether key is present.
func (f *File) Has(key string) bool {
	_, ok := f.index[key]
	return ok
}

func (f *File) lookup(key, want string) (KV, error) {
	kv, ok := f.Get(key)
	if !ok {
		return KV{}, &KeyError{Key: key, Want: want}
	}
	return kv, nil
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) {
	kv, err := f.lookup(key, "string")
	if err != nil {
		return "", err
	}
	s, ok := kv.Value.(string)
	if !ok {
		return "", &KeyError{Key: key, Want: "string", Have: typeName(kv)}
	}
	return s, nil
}

// Bool returns the bool value of key.
func (f *File) Bool(key string) (bool, error) {
	kv, err := f.lookup(key, "bool")
	if err != nil {
		return false, err
	}
	b, ok := kv.Value.(bool)
	if !ok {
		return false, &KeyError{Key: key, Want: "bool", Have: typeName(kv)}
	}
	return b, nil
}

// Int returns the value of key, which may be of any integer type, as int64.
// A uint64 above the int64 range is an error.
func (f *File) Int(key string) (int64, error) {
	kv, err := f.lookup(key, "integer")
	if err != nil {
		return 0, err
	}
	if v, ok := asInt(kv.Value); ok {
		return v, nil
	}
	return 0, &KeyError{Key: key, Want: "integer", Have: typeName(kv)}
}

// Uint32 returns the value of key, which may be of any integer type, when it
// fits in a uint32.
func (f *File) Uint32(key string) (uint32, error) {
	v, err := f.Int(key)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > 1<<32-1 {
		return 0, fmt.Errorf("gguf: key %q = %d does not fit in uint32", key, v)
	}
	return uint32(v), nil
}

// Float returns the value of key, a float32 or float64 (or an integer), as
// float64.
func (f *File) Float(key string) (float64, error) {
	kv, err := f.lookup(key, "float")
	if err != nil {
		return 0, err
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	}
	if v, ok := asInt(kv.Value); ok {
		return float64(v), nil
	}
	return 0, &KeyError{Key: key, Want: "float", Have: typeName(kv)}
}

// Array returns the array value of key.
func (f *File) Array(key string) (Array, error) {
	kv, err := f.lookup(key, "array")
	if err != nil {
		return Array{}, err
	}
	a, ok := kv.Value.(Array)
	if !ok {
		return Array{}, &KeyError{Key: key, Want: "array", Have: typeName(kv)}
	}
	return a, nil
}

// Strings returns the value of key, an array of strings.
func (f *File) Strings(key string) ([]string, error) {
	return arrayOf[string](f, key, "array of string")
}

// Float32s returns the value of key, an array of float32.
func (f *File) Float32s(key string) ([]float32, error) {
	return arrayOf[float32](f, key, "array of float32")
}

// Int32s returns the value of key, an array of int32 (or of uint32 values
// that fit in int32, or of smaller integers), converted to int32.
func (f *File) Int32s(key string) ([]int32, error) {
	kv, err := f.lookup(key, "array of int32")
	if err != nil {
		return nil, err
	}
	a, ok := kv.Value.(Array)
	if !ok {
		return nil, &KeyError{Key: key, Want: "array of int32", Have: typeName(kv)}
	}
	switch v := a.Values.(type) {
	case []int32:
		return v, nil
	case []uint32, []int8, []uint8, []int16, []uint16, []int64, []uint64:
		out := make([]int32, a.Len())
		for i := range out {
			x, _ := asInt(index(v, i))
			if x < -1<<31 || x > 1<<31-1 {
				return nil, fmt.Errorf("gguf: key %q element %d = %d does not fit in int32", key, i, x)
			}
			out[i] = int32(x)
		}
		return out, nil
	}
	return nil, &KeyError{Key: key, Want: "array of int32", Have: typeName(kv)}
}

func arrayOf[T any](f *File, key, want string) ([]T, error) {
	kv, err := f.lookup(key, want)
	if err != nil {
		return nil, err
	}
	if a, ok := kv.Value.(Array); ok {
		if v, ok := a.Values.([]T); ok {
			return v, nil
		}
	}
	return nil, &KeyError{Key: key, Want: want, Have: typeName(kv)}
}

func index(slice any, i int) any {
	switch v := slice.(type) {
	case []uint8:
		return v[i]
	case []int8:
		return v[i]
	case []uint16:
		return v[i]
	case []int16:
		return v[i]
	case []uint32:
		return v[i]
	case []int32:
		return v[i]
	case []uint64:
		return v[i]
	case []int64:
		return v[i]
	}
	return nil
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > 1<<63-1 {
			return 0, false
		}
		return int64(x), true
	}
	return 0, false
}
