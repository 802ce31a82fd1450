package mcpkit

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schemas are derived from the Go types a tool decodes into and encodes from,
// so that what a tool lists and what it does cannot drift apart:
//
//   - objects are closed (additionalProperties: false), and a field without
//     omitempty is required;
//   - the jsonschema tag is the property's description;
//   - bounds are struct tags beside it, and nowhere else: pattern,
//     minLength, maxLength, minimum, maximum, minItems, maxItems, and
//     enum (values separated by '|');
//   - a named string type gets its enumeration from a TypeSchema given to
//     SchemaFor (see Enum).
//
// The null the inference allows for slices, maps and pointers is dropped: a
// value the tool does not send is left out, never sent as null.

// TypeSchema fixes the schema of one Go type wherever it appears.
type TypeSchema struct {
	Type   reflect.Type
	Schema *jsonschema.Schema
}

// Enum is the schema of a named string type: exactly these values.
func Enum[T ~string](values ...T) TypeSchema {
	enum := make([]any, len(values))
	for i, v := range values {
		enum[i] = string(v)
	}
	return TypeSchema{Type: reflect.TypeFor[T](), Schema: &jsonschema.Schema{Type: "string", Enum: enum}}
}

// SchemaFor derives T's schema. It panics on a type it cannot describe or a
// malformed bound tag: the types are the program's own and fixed, so that is
// a programming error, found by the schema snapshot tests.
func SchemaFor[T any](types ...TypeSchema) *jsonschema.Schema {
	opts := &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{}}
	for _, ts := range types {
		opts.TypeSchemas[ts.Type] = ts.Schema
	}
	s, err := jsonschema.For[T](opts)
	if err != nil {
		panic(fmt.Sprintf("mcpkit: schema of %s: %v", reflect.TypeFor[T](), err))
	}
	normalize(s)
	if err := applyBounds(reflect.TypeFor[T](), s); err != nil {
		panic(fmt.Sprintf("mcpkit: schema of %s: %v", reflect.TypeFor[T](), err))
	}
	return s
}

// Property returns the named property of an object schema; it panics when
// there is none, so a misspelt name fails at start-up.
func Property(s *jsonschema.Schema, name string) *jsonschema.Schema {
	p, ok := s.Properties[name]
	if !ok {
		panic(fmt.Sprintf("mcpkit: schema has no property %q", name))
	}
	return p
}

// SchemaMap is a schema as a JSON object, the form a listing that is not
// typed (actiond's) carries.
func SchemaMap(s *jsonschema.Schema) map[string]any {
	raw, err := json.Marshal(s)
	if err != nil {
		panic(fmt.Sprintf("mcpkit: encoding a schema: %v", err))
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(fmt.Sprintf("mcpkit: decoding a schema: %v", err))
	}
	return out
}

func normalize(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		normalize(p)
	}
	normalize(s.Items)
	normalize(s.AdditionalProperties)
	for _, o := range s.OneOf {
		normalize(o)
	}
}

// applyBounds walks t's fields beside the object schema s and applies each
// field's bound tags to its property.
func applyBounds(t reflect.Type, s *jsonschema.Schema) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if s.Items != nil {
			return applyBounds(t.Elem(), s.Items)
		}
		return nil
	case reflect.Struct:
	default:
		return nil
	}
	for i := range t.NumField() {
		field := t.Field(i)
		if field.Anonymous && field.Type.Kind() == reflect.Struct {
			if err := applyBounds(field.Type, s); err != nil {
				return err
			}
			continue
		}
		name := jsonName(field)
		if name == "" {
			continue
		}
		p, ok := s.Properties[name]
		if !ok {
			continue
		}
		if err := applyTags(p, field.Tag); err != nil {
			return fmt.Errorf("field %s: %w", field.Name, err)
		}
		if err := applyBounds(field.Type, p); err != nil {
			return err
		}
	}
	return nil
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

func applyTags(p *jsonschema.Schema, tag reflect.StructTag) error {
	if v, ok := tag.Lookup("pattern"); ok {
		p.Pattern = v
	}
	if v, ok := tag.Lookup("enum"); ok {
		p.Enum = nil
		for _, value := range strings.Split(v, "|") {
			p.Enum = append(p.Enum, value)
		}
	}
	ints := []struct {
		key    string
		target **int
	}{
		{"minLength", &p.MinLength}, {"maxLength", &p.MaxLength},
		{"minItems", &p.MinItems}, {"maxItems", &p.MaxItems},
	}
	for _, b := range ints {
		v, ok := tag.Lookup(b.key)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("tag %s:%q is not a count", b.key, v)
		}
		*b.target = &n
	}
	numbers := []struct {
		key    string
		target **float64
	}{{"minimum", &p.Minimum}, {"maximum", &p.Maximum}}
	for _, b := range numbers {
		v, ok := tag.Lookup(b.key)
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("tag %s:%q is not a number", b.key, v)
		}
		*b.target = &n
	}
	return nil
}
