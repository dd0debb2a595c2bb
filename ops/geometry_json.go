package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decodeError is ReadGeometry's error for a document that does not
// decode: an empty file says so (not a bare EOF), a value of the wrong
// type says where it is and what is wanted.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%w: the file is empty; want {\"poses\": [...]}", ErrGeometry)
	case errors.As(err, &te):
		where := "the document"
		if te.Field != "" {
			where = strings.ToLower(te.Field)
		}
		return fmt.Errorf("%w: %s is a JSON %s, want %s", ErrGeometry, where, te.Value, jsonKind(te.Type))
	}
	return fmt.Errorf("%w: %v", ErrGeometry, err)
}

// jsonKind names what a JSON value decoded into t must be.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.Struct:
		return `an object, e.g. {"poses": [...]}`
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Struct {
			return "an array of poses, each an object"
		}
		return "an array of numbers"
	case reflect.Int:
		return "an integer"
	}
	return "a number"
}
