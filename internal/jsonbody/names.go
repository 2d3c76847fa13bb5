package jsonbody

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
)

// encoding/json takes the last of repeated keys and matches a key to a
// struct field without regard to case, so that {"product":1,"qty":1,
// "product":2} buys product 2 and {"Qty":5} sets qty: a client (or a
// proxy, or a filter in front that reads the first key) and the server
// would not agree on what a body says. checkNames refuses both before
// the body is decoded: a key repeated in one object, and a key that names
// a field of the target struct in another case. It walks the body's
// tokens beside the target's type, so that nested objects (the items of
// a checkout) are held to their own struct's names; inside a map, or a
// value whose type decodes itself, only repeated keys are refused. A
// body that is not JSON passes: the decoder says what is wrong with it.
// (encoding/json/v2 has these semantics, behind GOEXPERIMENT=jsonv2.)

// checkNames returns the error a client gets for body decoded into a
// value of type t, or nil.
func checkNames(body []byte, t reflect.Type) error {
	w := walk{dec: json.NewDecoder(bytes.NewReader(body))}
	w.dec.UseNumber() // numbers are not read here: no range errors
	err := w.value(t)
	if _, ok := err.(*nameError); ok {
		return err
	}
	return nil // a syntax error: the decoder's to report
}

// nameError is a refused key.
type nameError struct{ msg string }

func (e *nameError) Error() string { return e.msg }

// maxDepth bounds the nesting the walk follows: encoding/json refuses a
// body nested deeper than 10 000.
const maxDepth = 10_000

// walk reads a body's tokens; path is where it is, turned into text only
// for an error.
type walk struct {
	dec  *json.Decoder
	path []step
}

// step is a key, or an array's index.
type step struct {
	key     string
	index   int
	isIndex bool
}

func (w *walk) at(key string) string {
	var b strings.Builder
	for _, p := range append(w.path, step{key: key}) {
		switch {
		case p.isIndex:
			fmt.Fprintf(&b, "[%d]", p.index)
		case b.Len() > 0:
			b.WriteString("." + p.key)
		default:
			b.WriteString(p.key)
		}
	}
	return b.String()
}

// value reads one value of type t (nil: any).
func (w *walk) value(t reflect.Type) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if len(w.path) > maxDepth {
		return fmt.Errorf("nested too deep") // the decoder refuses it too
	}
	switch tok {
	case json.Delim('{'):
		return w.object(t)
	case json.Delim('['):
		var elem reflect.Type
		if t = deref(t); t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && !decodesItself(t) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.path = append(w.path, step{index: i, isIndex: true})
			err := w.value(elem)
			w.path = w.path[:len(w.path)-1]
			if err != nil {
				return err
			}
		}
		_, err := w.dec.Token() // ]
		return err
	}
	return nil
}

// object reads the members of an object (its { read) of type t.
func (w *walk) object(t reflect.Type) error {
	var fields map[string]field
	var elem reflect.Type
	if t = deref(t); t != nil && !decodesItself(t) {
		switch t.Kind() {
		case reflect.Struct:
			fields = fieldsOf(t)
		case reflect.Map:
			elem = t.Elem()
		}
	}
	seen := map[string]bool{}
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if seen[key] {
			return &nameError{fmt.Sprintf("%q appears twice: each name once", w.at(key))}
		}
		seen[key] = true
		next := elem
		if fields != nil {
			f, ok := fields[key]
			if !ok {
				for name := range fields {
					if strings.EqualFold(name, key) {
						return &nameError{fmt.Sprintf("%q: names are case-sensitive: did you mean %q?", w.at(key), name)}
					}
				}
			}
			next = f.typ // nil for an unknown field: the decoder's Strict decides
		}
		w.path = append(w.path, step{key: key})
		err = w.value(next)
		w.path = w.path[:len(w.path)-1]
		if err != nil {
			return err
		}
	}
	_, err := w.dec.Token() // }
	return err
}

// field is a struct field as JSON names it.
type field struct{ typ reflect.Type }

var fieldCache sync.Map // reflect.Type → map[string]field

// fieldsOf returns t's fields by their JSON names (encoding/json's
// naming: the tag's name, else the Go name; embedded structs' fields
// promoted; "-" and unexported fields left out).
func fieldsOf(t reflect.Type) map[string]field {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]field)
	}
	m := map[string]field{}
	addFields(t, m, 0)
	fieldCache.Store(t, m)
	return m
}

func addFields(t reflect.Type, m map[string]field, depth int) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if ft := deref(f.Type); ft.Kind() == reflect.Struct && depth < 8 {
				addFields(ft, m, depth+1)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup { // the shallower field wins, as in encoding/json
			m[name] = field{f.Type}
		}
	}
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesItself reports whether t reads its own JSON (its names are its
// own business).
func decodesItself(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(jsonUnmarshaler) || p.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}
