package telemetry

import (
	"bytes"
	"encoding"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// MarshalFinite is json.Marshal for values that may hold floats that are
// NaN or ±Inf, which JSON cannot write: each such float is written as null
// and its place is returned (JSON names, "result.sum", "rows[3].max"), in
// the order met. A value with none is encoded exactly as json.Marshal
// encodes it, and no places are returned.
func MarshalFinite(v any) ([]byte, []string, error) {
	b, err := json.Marshal(v)
	if !isNonFinite(err) {
		return b, nil, err
	}
	var places []string
	tree := finite("", reflect.ValueOf(v), &places)
	b, err = json.Marshal(tree)
	return b, places, err
}

func isNonFinite(err error) bool {
	_, ok := err.(*json.UnsupportedValueError)
	return ok
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// finite is v as encoding/json would see it, with every non-finite float
// replaced by nil (its place added to places): structs become objects
// with their JSON names in field order, maps objects with sorted keys.
func finite(at string, v reflect.Value, places *[]string) any {
	if !v.IsValid() {
		return nil
	}
	if t := v.Type(); v.CanInterface() && (t.Implements(marshalerType) || t.Implements(textMarshalerType)) {
		if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
			return nil
		}
		return v.Interface() // encodes itself
	}
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			*places = append(*places, at)
			return nil
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return finite(at, v.Elem(), places)
	case reflect.Struct:
		var o object
		structFields(at, v, &o, places)
		return o
	case reflect.Map:
		if v.IsNil() {
			return nil
		}
		var o object
		for _, k := range v.MapKeys() {
			name := mapKey(k)
			o = append(o, member{name, finite(join(at, name), v.MapIndex(k), places)})
		}
		slices.SortFunc(o, func(a, b member) int { return strings.Compare(a.key, b.key) })
		return o
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && (v.IsNil() || v.Type().Elem().Kind() == reflect.Uint8) {
			return v.Interface() // null, or base64 bytes
		}
		list := make([]any, v.Len())
		for i := range list {
			list[i] = finite(at+"["+strconv.Itoa(i)+"]", v.Index(i), places)
		}
		return list
	}
	if !v.CanInterface() {
		return nil
	}
	return v.Interface()
}

// structFields appends the JSON members of struct v to o: exported
// fields under their tag's name, "-" and empty omitempty fields left out,
// embedded structs' fields in their place.
func structFields(at string, v reflect.Value, o *object, places *[]string) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				ft, fv = ft.Elem(), fv.Elem()
			}
			if ft.Kind() == reflect.Struct {
				structFields(at, fv, o, places)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if strings.Contains(","+opts+",", ",omitempty,") && isEmpty(fv) {
			continue
		}
		*o = append(*o, member{name, finite(join(at, name), fv, places)})
	}
}

// isEmpty is encoding/json's notion of an empty value, for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func mapKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		b, _ := tm.MarshalText()
		return string(b)
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10)
	}
	return ""
}

func join(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// object is a JSON object whose members keep their order.
type object []member

type member struct {
	key string
	val any
}

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
