package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// decodeError is ReadGeometryFrame's error for a document that does not
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
		switch k := te.Type.Kind(); {
		case where == "poses" && k == reflect.Struct: // an element of the list
			return fmt.Errorf("%w: poses holds a JSON %s, want pose objects", ErrGeometry, te.Value)
		case k == reflect.Float64 && strings.HasPrefix(te.Value, "number "):
			return fmt.Errorf("%w: %s: %s is beyond the range of numbers (±1.8e308)", ErrGeometry, where, strings.TrimPrefix(te.Value, "number "))
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
	case reflect.String:
		return "a string"
	}
	return "a number"
}

// geometryKeys are the keys of the document's object and of each pose,
// spelled as written here: encoding/json would also take them in any case
// and take the last of two alike, so that a pose's "source" given twice,
// or "Source" beside "source", would render from one of them silently.
var geometryKeys = [2]map[string]bool{
	{"frame": true, "projection": true, "poses": true},
	{"source": true, "center": true, "u": true, "v": true, "pixel": true, "rows": true, "cols": true, "matrix": true},
}

// checkGeometryKeys refuses, in the document b, a key given twice in one
// object, and a key of the document or of a pose not spelled as
// geometryKeys spells it. Whatever else is wrong is left to the decoder.
func checkGeometryKeys(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // an object's next token is a key
		depth  int  // objects enclosing this one
	}
	var stack []frame
	objects := 0
	value := func() { // a whole value ended: its object expects a key again
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].key = true
		}
	}
	for {
		t, err := dec.Token()
		if err != nil {
			return nil // the end, or a syntax error the decoder reports
		}
		switch t := t.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{object: true, seen: map[string]bool{}, key: true, depth: objects})
				objects++
			case '[':
				stack = append(stack, frame{})
			default:
				if stack[len(stack)-1].object {
					objects--
				}
				stack = stack[:len(stack)-1]
				value()
			}
			continue
		case string:
			if len(stack) == 0 {
				break
			}
			if f := &stack[len(stack)-1]; f.object && f.key {
				if f.seen[t] {
					return fmt.Errorf("%w: %q given twice in one object", ErrGeometry, t)
				}
				f.seen[t] = true
				f.key = false
				if f.depth < len(geometryKeys) && !geometryKeys[f.depth][t] {
					for k := range geometryKeys[f.depth] {
						if strings.EqualFold(k, t) {
							return fmt.Errorf("%w: %q: write it %q", ErrGeometry, t, k)
						}
					}
				}
				continue
			}
		}
		value()
	}
}
