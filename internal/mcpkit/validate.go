package mcpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Validator checks JSON values against one compiled JSON Schema (2020-12
// unless the schema names another draft).
type Validator struct {
	schema *jsonschema.Schema
}

// Compile compiles a schema given as a *jsonschema-go Schema, a JSON object
// (map[string]any) or raw JSON. A reference to anything outside the schema is
// refused: a schema never makes the program fetch something.
func Compile(schema any) (*Validator, error) {
	raw, ok := schema.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(schema); err != nil {
			return nil, fmt.Errorf("encoding the schema: %w", err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.UseLoader(refuseLoader{})
	const location = "mem://schema.json"
	if err := compiler.AddResource(location, doc); err != nil {
		return nil, err
	}
	compiled, err := compiler.Compile(location)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %w", err)
	}
	return &Validator{schema: compiled}, nil
}

// MustCompile is Compile for the program's own schemas, which are fixed.
func MustCompile(schema any) *Validator {
	v, err := Compile(schema)
	if err != nil {
		panic("mcpkit: " + err.Error())
	}
	return v
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may not reference %s: only references inside the schema are allowed", url)
}

// Validate checks a JSON-shaped value (as encoding/json decodes into any). A
// failure is an *InvalidError naming the value at fault.
func (v *Validator) Validate(value any) error {
	err := v.schema.Validate(value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &InvalidError{Message: err.Error(), Err: err}
	}
	leaf := deepest(verr)
	return &InvalidError{Path: pathOf(leaf.InstanceLocation), Message: describe(leaf), Err: err}
}

// ValidateJSON decodes raw and validates it; raw that is not JSON is an
// *InvalidError too.
func (v *Validator) ValidateJSON(raw []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return &InvalidError{Message: "the value is not JSON: " + err.Error(), Err: err}
	}
	return v.Validate(value)
}

// InvalidError is a value that does not match its schema. Path names the
// value at fault the way a person writes it (tasks[0].task_id), empty for
// the whole value; Message is a sentence that includes it.
type InvalidError struct {
	Path    string
	Message string
	Err     error
}

func (e *InvalidError) Error() string { return e.Message }

func (e *InvalidError) Unwrap() error { return e.Err }

// deepest follows the first cause down to the failure a person can fix:
// the groups above it only say that something beneath failed.
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		if _, oneOf := e.ErrorKind.(*kind.OneOf); oneOf {
			return e
		}
		e = e.Causes[0]
	}
	return e
}

func pathOf(location []string) string {
	var b strings.Builder
	for _, part := range location {
		if _, err := strconv.Atoi(part); err == nil && b.Len() > 0 {
			b.WriteString("[" + part + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(part)
	}
	return b.String()
}

// describe says in a sentence what is wrong and what is accepted.
func describe(e *jsonschema.ValidationError) string {
	subject := pathOf(e.InstanceLocation)
	if subject == "" {
		subject = "the value"
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		names := make([]string, len(k.Missing))
		for i, m := range k.Missing {
			names[i] = joinPath(subject, m)
		}
		return strings.Join(names, ", ") + " is required"
	case *kind.AdditionalProperties:
		where := "this tool takes"
		if subject != "the value" {
			where = subject + " takes"
		}
		return fmt.Sprintf("%s no argument %s; see the inputSchema", where, quoteAll(k.Properties))
	case *kind.Type:
		return fmt.Sprintf("%s must be %s, not %s", subject, typeWords(k.Want), article(k.Got))
	case *kind.Pattern:
		return fmt.Sprintf("%s %s is not allowed: it must match %s", subject, clipQuote(k.Got), k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("%s is %d characters long; at least %d are required", subject, k.Got, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("%s is %d characters long; at most %d are accepted", subject, k.Got, k.Want)
	case *kind.Minimum:
		return fmt.Sprintf("%s is %s; give at least %s", subject, ratString(k.Got), ratString(k.Want))
	case *kind.Maximum:
		return fmt.Sprintf("%s is %s; give at most %s", subject, ratString(k.Got), ratString(k.Want))
	case *kind.MinItems:
		return fmt.Sprintf("%s has %d items; at least %d are required", subject, k.Got, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("%s has %d items; at most %d are accepted", subject, k.Got, k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return fmt.Sprintf("%s %s is not one of %s", subject, clipQuote(fmt.Sprint(k.Got)), strings.Join(want, ", "))
	case *kind.Const:
		return fmt.Sprintf("%s must be %v", subject, k.Want)
	case *kind.OneOf:
		return fmt.Sprintf("%s matches none of the forms its schema allows", subject)
	case *kind.FalseSchema:
		return fmt.Sprintf("%s is not allowed here", subject)
	}
	return fmt.Sprintf("%s does not match its schema: %v", subject, e.ErrorKind)
}

func joinPath(parent, name string) string {
	if parent == "the value" {
		return name
	}
	return parent + "." + name
}

func quoteAll(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = clipQuote(n)
	}
	return strings.Join(quoted, ", ")
}

func clipQuote(s string) string {
	const max = 80
	if len(s) > max {
		cut := max
		for cut > 0 && s[cut]&0xC0 == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(s)
}

func typeWords(want []string) string {
	words := make([]string, len(want))
	for i, w := range want {
		words[i] = article(w)
	}
	return strings.Join(words, " or ")
}

func article(jsonType string) string {
	switch jsonType {
	case "integer":
		return "a whole number"
	case "number":
		return "a number"
	case "string":
		return "a string"
	case "boolean":
		return "true or false"
	case "object":
		return "an object"
	case "array":
		return "an array"
	case "null":
		return "null"
	}
	return jsonType
}

func ratString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}
