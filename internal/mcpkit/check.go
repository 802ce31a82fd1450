package mcpkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// A tool's schemas come from SchemaFor, so they use a small, fixed part of
// JSON Schema: types, properties, required, additionalProperties, items,
// the bound keywords, enum, const and the combinators. Checking that part
// needs no general validator, whose start-up (it compiles the meta-schemas
// of five drafts, some 6 ms) every isx command would otherwise pay before
// it does anything. newChecker refuses a schema that uses any other
// keyword, so no keyword is ever silently left unchecked; a test holds the
// checker's verdicts against the general validator's (anyschema).

// checker validates JSON values against one tool schema.
type checker struct {
	root     *jsonschema.Schema
	patterns map[*jsonschema.Schema]*regexp.Regexp
}

// keywords the checker understands; annotations are allowed and ignored.
var checkedKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"pattern": true, "minLength": true, "maxLength": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "minItems": true, "maxItems": true,
	"enum": true, "const": true, "oneOf": true, "anyOf": true, "allOf": true, "not": true,
	"description": true, "title": true, "default": true, "examples": true, "deprecated": true,
	"readOnly": true, "writeOnly": true, "$comment": true, "$schema": true,
}

func newChecker(s *jsonschema.Schema) (*checker, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	if err := supported(tree, "#"); err != nil {
		return nil, err
	}
	c := &checker{root: s, patterns: map[*jsonschema.Schema]*regexp.Regexp{}}
	if err := c.compilePatterns(s); err != nil {
		return nil, err
	}
	return c, nil
}

// supported walks the schema as JSON and refuses keywords outside the part.
func supported(tree any, where string) error {
	node, ok := tree.(map[string]any)
	if !ok {
		return nil // true or false
	}
	for key, value := range node {
		if !checkedKeywords[key] {
			return fmt.Errorf("%s uses %q, which tool schemas do not", where, key)
		}
		switch key {
		case "properties":
			for name, sub := range value.(map[string]any) {
				if err := supported(sub, where+"/properties/"+name); err != nil {
					return err
				}
			}
		case "additionalProperties", "items":
			if err := supported(value, where+"/"+key); err != nil {
				return err
			}
		case "not":
			if sub, ok := value.(map[string]any); !ok || len(sub) != 0 {
				return fmt.Errorf("%s/not is not the false schema, the only not tool schemas use", where)
			}
		case "oneOf", "anyOf", "allOf":
			for i, sub := range value.([]any) {
				if err := supported(sub, fmt.Sprintf("%s/%s/%d", where, key, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (c *checker) compilePatterns(s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			return fmt.Errorf("pattern %q: %w", s.Pattern, err)
		}
		c.patterns[s] = re
	}
	subs := append([]*jsonschema.Schema{s.Items, s.AdditionalProperties}, s.OneOf...)
	subs = append(append(subs, s.AnyOf...), s.AllOf...)
	for _, p := range s.Properties {
		subs = append(subs, p)
	}
	for _, sub := range subs {
		if err := c.compilePatterns(sub); err != nil {
			return err
		}
	}
	return nil
}

// checkJSON decodes raw, keeping numbers exact, and checks it.
func (c *checker) checkJSON(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return NewInvalid("", "the value is not JSON: "+err.Error(), err)
	}
	return c.check(value)
}

// check validates a JSON-shaped value (maps, slices, strings, numbers,
// booleans and nil).
func (c *checker) check(value any) error {
	if v := c.at(c.root, value, nil); v != nil {
		return v.Error(nil)
	}
	return nil
}

func (c *checker) at(s *jsonschema.Schema, value any, loc []string) *Violation {
	if s == nil {
		return nil
	}
	if s.Not != nil {
		return &Violation{Location: loc, Keyword: "false"}
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) > 0 && !slices.ContainsFunc(types, func(t string) bool { return hasType(value, t) }) {
		return &Violation{Location: loc, Keyword: "type", Got: jsonType(value), Names: types}
	}
	if s.Const != nil && !sameJSON(value, *s.Const) {
		return &Violation{Location: loc, Keyword: "const", Want: ValueText(*s.Const)}
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return sameJSON(value, e) }) {
		names := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			names[i] = ValueText(e)
		}
		return &Violation{Location: loc, Keyword: "enum", Got: ValueText(value), Names: names}
	}
	if v := c.byKind(s, value, loc); v != nil {
		return v
	}
	return c.combined(s, value, loc)
}

func (c *checker) byKind(s *jsonschema.Schema, value any, loc []string) *Violation {
	switch v := value.(type) {
	case string:
		return c.str(s, v, loc)
	case []any:
		return c.array(s, v, loc)
	case map[string]any:
		return c.object(s, v, loc)
	}
	if n, ok := number(value); ok {
		return bounds(s, n, loc)
	}
	return nil
}

func (c *checker) str(s *jsonschema.Schema, v string, loc []string) *Violation {
	n := utf8.RuneCountInString(v)
	if s.MinLength != nil && n < *s.MinLength {
		return &Violation{Location: loc, Keyword: "minLength", Got: strconv.Itoa(n), Want: strconv.Itoa(*s.MinLength)}
	}
	if s.MaxLength != nil && n > *s.MaxLength {
		return &Violation{Location: loc, Keyword: "maxLength", Got: strconv.Itoa(n), Want: strconv.Itoa(*s.MaxLength)}
	}
	if re := c.patterns[s]; re != nil && !re.MatchString(v) {
		return &Violation{Location: loc, Keyword: "pattern", Got: v, Want: s.Pattern}
	}
	return nil
}

func bounds(s *jsonschema.Schema, n *big.Rat, loc []string) *Violation {
	limits := []struct {
		keyword string
		limit   *float64
		fails   func(cmp int) bool
	}{
		{"minimum", s.Minimum, func(cmp int) bool { return cmp < 0 }},
		{"maximum", s.Maximum, func(cmp int) bool { return cmp > 0 }},
		{"exclusiveMinimum", s.ExclusiveMinimum, func(cmp int) bool { return cmp <= 0 }},
		{"exclusiveMaximum", s.ExclusiveMaximum, func(cmp int) bool { return cmp >= 0 }},
	}
	for _, l := range limits {
		if l.limit == nil {
			continue
		}
		limit := new(big.Rat).SetFloat64(*l.limit)
		if l.fails(n.Cmp(limit)) {
			return &Violation{Location: loc, Keyword: l.keyword, Got: NumberText(n), Want: NumberText(limit)}
		}
	}
	return nil
}

func (c *checker) array(s *jsonschema.Schema, v []any, loc []string) *Violation {
	if s.MinItems != nil && len(v) < *s.MinItems {
		return &Violation{Location: loc, Keyword: "minItems", Got: strconv.Itoa(len(v)), Want: strconv.Itoa(*s.MinItems)}
	}
	if s.MaxItems != nil && len(v) > *s.MaxItems {
		return &Violation{Location: loc, Keyword: "maxItems", Got: strconv.Itoa(len(v)), Want: strconv.Itoa(*s.MaxItems)}
	}
	for i, item := range v {
		if bad := c.at(s.Items, item, append(slices.Clip(loc), strconv.Itoa(i))); bad != nil {
			return bad
		}
	}
	return nil
}

func (c *checker) object(s *jsonschema.Schema, v map[string]any, loc []string) *Violation {
	var missing []string
	for _, name := range s.Required {
		if _, ok := v[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return &Violation{Location: loc, Keyword: "required", Names: missing}
	}
	var extra []string
	for name := range v {
		if _, known := s.Properties[name]; !known {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 && s.AdditionalProperties != nil && s.AdditionalProperties.Not != nil {
		return &Violation{Location: loc, Keyword: "additionalProperties", Names: extra}
	}
	for _, name := range propertyNames(s) {
		item, present := v[name]
		if !present {
			continue
		}
		if bad := c.at(s.Properties[name], item, append(slices.Clip(loc), name)); bad != nil {
			return bad
		}
	}
	for _, name := range extra {
		if bad := c.at(s.AdditionalProperties, v[name], append(slices.Clip(loc), name)); bad != nil {
			return bad
		}
	}
	return nil
}

// propertyNames is the schema's property order, the Go fields' order.
func propertyNames(s *jsonschema.Schema) []string {
	if len(s.PropertyOrder) == len(s.Properties) {
		return s.PropertyOrder
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (c *checker) combined(s *jsonschema.Schema, value any, loc []string) *Violation {
	for _, sub := range s.AllOf {
		if bad := c.at(sub, value, loc); bad != nil {
			return bad
		}
	}
	if len(s.AnyOf) > 0 && !slices.ContainsFunc(s.AnyOf, func(sub *jsonschema.Schema) bool { return c.at(sub, value, loc) == nil }) {
		return &Violation{Location: loc, Keyword: "oneOf"}
	}
	if len(s.OneOf) > 0 {
		matched := 0
		var only *Violation
		for _, sub := range s.OneOf {
			if bad := c.at(sub, value, loc); bad == nil {
				matched++
			} else if len(s.OneOf) == 1 {
				only = bad
			}
		}
		if only != nil {
			return only
		}
		if matched != 1 {
			return &Violation{Location: loc, Keyword: "oneOf"}
		}
	}
	return nil
}

func hasType(value any, t string) bool {
	switch t {
	case "null":
		return value == nil
	case "boolean":
		_, ok := value.(bool)
		return ok
	case "string":
		_, ok := value.(string)
		return ok
	case "array":
		_, ok := value.([]any)
		return ok
	case "object":
		_, ok := value.(map[string]any)
		return ok
	case "number":
		_, ok := number(value)
		return ok
	case "integer":
		n, ok := number(value)
		return ok && n.IsInt()
	}
	return false
}

func jsonType(value any) string {
	for _, t := range []string{"null", "boolean", "string", "array", "object", "integer", "number"} {
		if hasType(value, t) {
			return t
		}
	}
	return fmt.Sprintf("%T", value)
}

// number reads a JSON number however it was decoded.
func number(value any) (*big.Rat, bool) {
	switch n := value.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(string(n))
		return r, ok
	case float64:
		return new(big.Rat).SetFloat64(n), true
	case float32:
		return new(big.Rat).SetFloat64(float64(n)), true
	case int:
		return new(big.Rat).SetInt64(int64(n)), true
	case int64:
		return new(big.Rat).SetInt64(n), true
	}
	return nil, false
}

// sameJSON compares two JSON values, numbers by value.
func sameJSON(a, b any) bool {
	if x, ok := number(a); ok {
		y, ok := number(b)
		return ok && x.Cmp(y) == 0
	}
	switch x := a.(type) {
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, sameJSON)
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}
