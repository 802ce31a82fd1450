package mcpkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Spec is what a tool says of itself besides its types.
type Spec struct {
	Name        string
	Title       string
	Description string
	Annotations *mcp.ToolAnnotations
	// Types fix the schemas of named types the tool's structs use (Enum).
	Types []TypeSchema
	// Shape, when set, adjusts the derived schemas once, before they are
	// compiled: for what a struct cannot say (exec's two result forms, a
	// state that is never unknown when read from an instance).
	Shape func(input, output *jsonschema.Schema) (*jsonschema.Schema, *jsonschema.Schema)
	// Retired are arguments older releases took, refused by name with the
	// sentence given, before anything else is checked.
	Retired map[string]string
}

// Tool is a tool defined from Go types: its arguments decode into In and
// its structured result is Out. Both schemas are derived once, when the
// tool is made; every call's arguments are validated against the input
// schema, then decoded strictly, then checked by In's Validate method when
// it has one.
type Tool[In, Out any] struct {
	spec   Spec
	input  *jsonschema.Schema
	output *jsonschema.Schema
	// check and result are compiled on first use: a program defines all
	// its tools when it starts, and compiling a schema costs some ten
	// times what deriving it does.
	check  func() *checker
	result func() *checker
}

// Validating is implemented by argument types that check more than a
// schema can say (a purpose without control characters, stdin only in the
// foreground). Its error is returned from Decode as it is.
type Validating interface{ Validate() error }

// NewTool derives In's and Out's schemas; each is compiled when it is first
// used.
func NewTool[In, Out any](spec Spec) *Tool[In, Out] {
	input, output := SchemaFor[In](spec.Types...), SchemaFor[Out](spec.Types...)
	if spec.Shape != nil {
		input, output = spec.Shape(input, output)
	}
	return &Tool[In, Out]{spec: spec, input: input, output: output,
		check:  sync.OnceValue(func() *checker { return mustChecker(spec.Name, input) }),
		result: sync.OnceValue(func() *checker { return mustChecker(spec.Name, output) })}
}

// Name is the tool's name.
func (t *Tool[In, Out]) Name() string { return t.spec.Name }

// Description is the tool's description.
func (t *Tool[In, Out]) Description() string { return t.spec.Description }

// InputSchema and OutputSchema are the derived schemas; callers must not
// change them.
func (t *Tool[In, Out]) InputSchema() *jsonschema.Schema  { return t.input }
func (t *Tool[In, Out]) OutputSchema() *jsonschema.Schema { return t.output }

// Listing is the tool as tools/list shows it.
func (t *Tool[In, Out]) Listing() *mcp.Tool {
	return &mcp.Tool{Name: t.spec.Name, Title: t.spec.Title, Description: t.spec.Description,
		Annotations: t.spec.Annotations, InputSchema: t.input, OutputSchema: t.output}
}

// ErrNotObject is returned by Decode for arguments that are not a JSON
// object: a protocol fault, which a server answers as a JSON-RPC error
// rather than as a tool result.
var ErrNotObject = errors.New("tools/call arguments must be a JSON object")

// Decode validates raw arguments and decodes them. Absent or null arguments
// are the empty object. A failure is ErrNotObject, an *InvalidError naming
// the argument at fault, or what In's Validate returned.
func (t *Tool[In, Out]) Decode(raw json.RawMessage) (In, error) {
	var zero In
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return zero, ErrNotObject
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return zero, ErrNotObject
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return zero, NewInvalid("", "the arguments hold more than one JSON value", nil)
	}
	return t.decodeChecked(args, trimmed)
}

// DecodeValue is Decode for arguments already decoded into a JSON object.
func (t *Tool[In, Out]) DecodeValue(args map[string]any) (In, error) {
	if args == nil {
		args = map[string]any{}
	}
	return t.decodeChecked(args, nil)
}

// decodeChecked checks the arguments against the retired names and the
// input schema, then decodes them (from raw when the caller has it) into In
// and runs In's own checks.
func (t *Tool[In, Out]) decodeChecked(args map[string]any, raw []byte) (In, error) {
	var in In
	for name := range args {
		if why, retired := t.spec.Retired[name]; retired {
			return in, NewInvalid(name, why, nil)
		}
	}
	if err := t.check().check(args); err != nil {
		return in, err
	}
	if integralNumbers(args) {
		raw = nil // 2.0 is a whole number to the schema; Go wants it written 2
	}
	if raw == nil {
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return in, NewInvalid("", "the arguments cannot be encoded: "+err.Error(), err)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, NewInvalid("", "the arguments cannot be read: "+err.Error(), err)
	}
	if v, ok := any(&in).(Validating); ok {
		if err := v.Validate(); err != nil {
			return in, err
		}
	}
	return in, nil
}

// CheckResult validates a structured result against the output schema; the
// tests call it on every result a tool gives.
func (t *Tool[In, Out]) CheckResult(out any) error {
	raw, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("%s: encoding the result: %w", t.spec.Name, err)
	}
	if err := t.result().checkJSON(raw); err != nil {
		return fmt.Errorf("%s: the result does not match the outputSchema: %w", t.spec.Name, err)
	}
	return nil
}

// mustChecker prepares a tool's schema for checking; the schemas are the
// program's own and fixed, so a failure is a programming error that the
// schema snapshot tests find.
func mustChecker(tool string, s *jsonschema.Schema) *checker {
	c, err := newChecker(s)
	if err != nil {
		panic(fmt.Sprintf("mcpkit: the schema of tool %s: %v", tool, err))
	}
	return c
}

// integralNumbers rewrites numbers that are whole but written with a
// fraction or an exponent (2.0, 1e3) as whole numbers, in place, and
// reports whether it rewrote any.
func integralNumbers(value any) bool {
	changed := false
	visit := func(inner any, set func(any)) {
		if n, ok := inner.(json.Number); ok {
			if whole, ok := wholeNumber(n); ok {
				set(whole)
				changed = true
			}
			return
		}
		changed = integralNumbers(inner) || changed
	}
	switch v := value.(type) {
	case map[string]any:
		for k, inner := range v {
			visit(inner, func(n any) { v[k] = n })
		}
	case []any:
		for i, inner := range v {
			visit(inner, func(n any) { v[i] = n })
		}
	}
	return changed
}

func wholeNumber(n json.Number) (json.Number, bool) {
	if !strings.ContainsAny(string(n), ".eE") {
		return n, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() {
		return n, false
	}
	return json.Number(r.Num().String()), true
}
