// Package anyschema validates JSON values against any JSON Schema a person
// writes (2020-12 unless the schema names another draft), such as the input
// and output schemas of actiond's tool definitions, with the same readable
// messages as mcpkit's own tool schemas.
//
// It costs some 6 ms of process start (the validator compiles every draft's
// meta-schema when it loads), which is why mcpkit checks its own tool
// schemas without it and isx does not link it.
package anyschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// location is where a schema is compiled: a name of no consequence, which
// messages leave out.
const location = "mem://schema.json"

// Validator checks JSON values against one compiled schema.
type Validator struct {
	schema *jsonschema.Schema
}

// Compile compiles a schema given as a Go value that encodes to JSON (a
// map[string]any, a *jsonschema-go Schema) or as raw JSON. A reference to
// anything outside the schema is refused: a schema never makes the program
// fetch something.
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
	if err := compiler.AddResource(location, doc); err != nil {
		return nil, err
	}
	compiled, err := compiler.Compile(location)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %w", readable(err))
	}
	return &Validator{schema: compiled}, nil
}

// readable says where in the schema a schema breaks the meta-schema and
// how, instead of the validator's report, which names the schema by the
// address it was compiled under and the meta-schema's rule groups.
func readable(err error) error {
	var invalid *jsonschema.SchemaValidationError
	var verr *jsonschema.ValidationError
	if !errors.As(err, &invalid) || !errors.As(invalid.Err, &verr) {
		// Another failure, such as a $ref to nothing, names places in the
		// schema by that address.
		return mcpkit.NewInvalid("", strings.ReplaceAll(err.Error(), location, ""), err)
	}
	cause := deepest(verr)
	path := mcpkit.PathOf(cause.InstanceLocation)
	if format, ok := cause.ErrorKind.(*kind.Format); ok {
		return mcpkit.NewInvalid(path, fmt.Sprintf("%s is not a valid %s: %v", path, format.Want, format.Err), err)
	}
	sentence := violation(cause).Sentence()
	if path == "" {
		sentence = "the schema" + strings.TrimPrefix(sentence, "the value")
	}
	return mcpkit.NewInvalid(path, sentence, err)
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("a schema may not reference %s: only references inside the schema are allowed", url)
}

// Validate checks a JSON-shaped value (as encoding/json decodes into any). A
// failure is an *mcpkit.InvalidError naming the value at fault.
func (v *Validator) Validate(value any) error {
	err := v.schema.Validate(value)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return mcpkit.NewInvalid("", err.Error(), err)
	}
	return violation(deepest(verr)).Error(err)
}

// ValidateJSON decodes raw and validates it; raw that is not JSON is an
// *mcpkit.InvalidError too.
func (v *Validator) ValidateJSON(raw []byte) error {
	value, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return mcpkit.NewInvalid("", "the value is not JSON: "+err.Error(), err)
	}
	return v.Validate(value)
}

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

// violation reads the validator's report in mcpkit's terms.
func violation(e *jsonschema.ValidationError) mcpkit.Violation {
	v := mcpkit.Violation{Location: e.InstanceLocation}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		v.Keyword, v.Names = "required", k.Missing
	case *kind.AdditionalProperties:
		v.Keyword, v.Names = "additionalProperties", k.Properties
	case *kind.Type:
		v.Keyword, v.Got, v.Names = "type", k.Got, k.Want
	case *kind.Pattern:
		v.Keyword, v.Got, v.Want = "pattern", k.Got, k.Want
	case *kind.MinLength:
		v.Keyword, v.Got, v.Want = "minLength", strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MaxLength:
		v.Keyword, v.Got, v.Want = "maxLength", strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.Minimum:
		v.Keyword, v.Got, v.Want = "minimum", mcpkit.NumberText(k.Got), mcpkit.NumberText(k.Want)
	case *kind.Maximum:
		v.Keyword, v.Got, v.Want = "maximum", mcpkit.NumberText(k.Got), mcpkit.NumberText(k.Want)
	case *kind.ExclusiveMinimum:
		v.Keyword, v.Got, v.Want = "exclusiveMinimum", mcpkit.NumberText(k.Got), mcpkit.NumberText(k.Want)
	case *kind.ExclusiveMaximum:
		v.Keyword, v.Got, v.Want = "exclusiveMaximum", mcpkit.NumberText(k.Got), mcpkit.NumberText(k.Want)
	case *kind.MinItems:
		v.Keyword, v.Got, v.Want = "minItems", strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.MaxItems:
		v.Keyword, v.Got, v.Want = "maxItems", strconv.Itoa(k.Got), strconv.Itoa(k.Want)
	case *kind.Enum:
		v.Keyword, v.Got = "enum", mcpkit.ValueText(k.Got)
		for _, w := range k.Want {
			v.Names = append(v.Names, mcpkit.ValueText(w))
		}
	case *kind.Const:
		v.Keyword, v.Want = "const", mcpkit.ValueText(k.Want)
	case *kind.OneOf:
		v.Keyword = "oneOf"
	case *kind.FalseSchema:
		v.Keyword = "false"
	default:
		v.Keyword = fmt.Sprint(e.ErrorKind)
	}
	return v
}
