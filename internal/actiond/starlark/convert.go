package starlark

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// maxDepth bounds nesting both ways; a Starlark list can contain itself, and
// JSON nested this deep is an error anyway.
const maxDepth = 256

// maxExactFloat is the largest magnitude at which every integer is a float64.
const maxExactFloat = 1 << 53

// jsonValuer is a Starlark value of this package with a JSON form, such as a
// decimal, whose JSON form is its string.
type jsonValuer interface {
	star.Value
	JSON() (any, error)
}

// notJSON names where in a value a non-JSON part sits; limit is set
// instead when the conversion would take more than the run's budget.
type notJSON struct {
	path   []string // innermost first
	reason string
	limit  *Error
}

func (e *notJSON) at(root string) string {
	var b strings.Builder
	b.WriteString(root)
	for i := len(e.path) - 1; i >= 0; i-- {
		b.WriteString(e.path[i])
	}
	b.WriteString(" ")
	b.WriteString(e.reason)
	return b.String()
}

func (e *notJSON) within(segment string) *notJSON {
	e.path = append(e.path, segment)
	return e
}

// toJSON converts a Starlark value to a JSON-able Go value: None → nil, bool,
// string, int → int64 (json.Number when it does not fit, so no digit is lost),
// float → float64, dict with string keys and struct → map[string]any, list
// and tuple → []any. root names the value in an error ("the result").
//
// Each part is charged to b (nil: none) as often as it appears: a value
// sharing one string in a thousand places is a thousand copies of it once
// it is JSON text, so a conversion past the budget is its *Error.
func toJSON(v star.Value, root string, b *budget) (any, error) {
	out, err := goValue(v, 0, b)
	if err != nil {
		if err.limit != nil {
			return nil, err.limit
		}
		return nil, fmt.Errorf("%s", err.at(root))
	}
	return out, nil
}

// toJSON converts a value of the run, charged to its budget.
func (r *run) toJSON(v star.Value, root string) (any, error) { return toJSON(v, root, r.budget) }

func chargeJSON(b *budget, n int64) *notJSON {
	if err := b.charge(n, "a JSON value"); err != nil {
		return &notJSON{limit: err.(*Error)}
	}
	return nil
}

func goValue(v star.Value, depth int, b *budget) (any, *notJSON) {
	if depth > maxDepth {
		return nil, &notJSON{reason: fmt.Sprintf("is nested more than %d levels deep (does it contain itself?)", maxDepth)}
	}
	if err := chargeJSON(b, slotBytes+shallowBytes(v)); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case star.NoneType:
		return nil, nil
	case star.Bool:
		return bool(v), nil
	case star.String:
		return string(v), nil
	case star.Int:
		if i, ok := v.Int64(); ok {
			return i, nil
		}
		return json.Number(v.String()), nil
	case star.Float:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, &notJSON{reason: fmt.Sprintf("is the float %s, which JSON cannot represent", v)}
		}
		return f, nil
	case *star.Dict:
		return dictValue(v, depth, b)
	case *star.List:
		return sequenceValue(v, v.Len(), depth, b)
	case star.Tuple:
		return sequenceValue(v, v.Len(), depth, b)
	case *starlarkstruct.Struct:
		return attrsValue(v, depth, b)
	case jsonValuer:
		out, err := v.JSON()
		if err != nil {
			return nil, &notJSON{reason: fmt.Sprintf("is a %s that %v", v.Type(), err)}
		}
		return out, nil
	}
	return nil, &notJSON{reason: fmt.Sprintf("is a value of type %s, which is not JSON", v.Type())}
}

func dictValue(d *star.Dict, depth int, b *budget) (any, *notJSON) {
	out := make(map[string]any, d.Len())
	for _, item := range d.Items() {
		key, ok := item[0].(star.String)
		if !ok {
			return nil, &notJSON{reason: fmt.Sprintf("has the key %s of type %s; JSON object keys are strings", item[0], item[0].Type())}
		}
		value, err := goValue(item[1], depth+1, b)
		if err != nil {
			if err.limit != nil {
				return nil, err
			}
			return nil, err.within("[" + strconv.Quote(string(key)) + "]")
		}
		out[string(key)] = value
	}
	return out, nil
}

func sequenceValue(seq star.Indexable, n, depth int, b *budget) (any, *notJSON) {
	out := make([]any, n)
	for i := range n {
		value, err := goValue(seq.Index(i), depth+1, b)
		if err != nil {
			if err.limit != nil {
				return nil, err
			}
			return nil, err.within("[" + strconv.Itoa(i) + "]")
		}
		out[i] = value
	}
	return out, nil
}

func attrsValue(s *starlarkstruct.Struct, depth int, b *budget) (any, *notJSON) {
	names := s.AttrNames()
	out := make(map[string]any, len(names))
	for _, name := range names {
		field, err := s.Attr(name)
		if err != nil {
			return nil, &notJSON{reason: err.Error()}
		}
		value, nerr := goValue(field, depth+1, b)
		if nerr != nil {
			if nerr.limit != nil {
				return nil, nerr
			}
			return nil, nerr.within("." + name)
		}
		out[name] = value
	}
	return out, nil
}

// fromJSON converts a JSON-able Go value to Starlark. Numbers with an
// integral value become int (a float64 only up to 2^53, past which it is not
// exact), others float. Object keys are sorted so that a script sees the
// same order on every run. Types other than the JSON ones are marshalled to
// JSON first.
//
// What the values take is charged to b (nil: none): what a tool answers
// joins the run's memory.
func fromJSON(v any, b *budget) (star.Value, error) {
	return starValue(v, 0, b)
}

func starValue(v any, depth int, b *budget) (star.Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value nested more than %d levels deep", maxDepth)
	}
	var n int64 = slotBytes
	switch v := v.(type) {
	case string:
		n += int64(len(v))
	case map[string]any:
		n += headerBytes + int64(len(v))*entryBytes
	case []any:
		n += headerBytes + int64(len(v))*slotBytes
	}
	if err := b.charge(n, "a value a call answered"); err != nil {
		return nil, err
	}
	switch v := v.(type) {
	case nil:
		return star.None, nil
	case bool:
		return star.Bool(v), nil
	case string:
		return star.String(v), nil
	case float64:
		return floatValue(v), nil
	case float32:
		return floatValue(float64(v)), nil
	case int:
		return star.MakeInt(v), nil
	case int64:
		return star.MakeInt64(v), nil
	case int32:
		return star.MakeInt64(int64(v)), nil
	case uint64:
		return star.MakeUint64(v), nil
	case uint32:
		return star.MakeUint64(uint64(v)), nil
	case uint:
		return star.MakeUint(v), nil
	case json.Number:
		return numberValue(v)
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		dict := star.NewDict(len(v))
		for _, key := range keys {
			value, err := starValue(v[key], depth+1, b)
			if err != nil {
				return nil, err
			}
			if err := dict.SetKey(star.String(key), value); err != nil {
				return nil, err
			}
		}
		return dict, nil
	case []any:
		elems := make([]star.Value, len(v))
		for i, elem := range v {
			value, err := starValue(elem, depth+1, b)
			if err != nil {
				return nil, err
			}
			elems[i] = value
		}
		return star.NewList(elems), nil
	}
	return marshalledValue(v, depth, b)
}

func floatValue(f float64) star.Value {
	if f == math.Trunc(f) && math.Abs(f) <= maxExactFloat {
		return star.MakeInt64(int64(f))
	}
	return star.Float(f)
}

func numberValue(n json.Number) (star.Value, error) {
	text := string(n)
	if !strings.ContainsAny(text, ".eE") {
		i, ok := new(big.Int).SetString(text, 10)
		if !ok {
			return nil, fmt.Errorf("%q is not a JSON number", text)
		}
		return star.MakeBigInt(i), nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not a JSON number: %w", text, err)
	}
	return floatValue(f), nil
}

// marshalledValue takes any other type the way encoding/json sees it.
func marshalledValue(v any, depth int, b *budget) (star.Value, error) {
	if kind := reflect.ValueOf(v).Kind(); kind == reflect.Func || kind == reflect.Chan || kind == reflect.Complex64 || kind == reflect.Complex128 {
		return nil, fmt.Errorf("a Go %T is not JSON", v)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("a Go %T is not JSON: %w", v, err)
	}
	decoder := json.NewDecoder(strings.NewReader(string(data)))
	decoder.UseNumber()
	var decoded any
	if err := decoder.Decode(&decoded); err != nil {
		return nil, fmt.Errorf("a Go %T is not JSON: %w", v, err)
	}
	return starValue(decoded, depth, b)
}
