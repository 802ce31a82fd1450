package mcpserver

import (
	"reflect"
	"strings"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Arguments reach a tool as raw JSON and are decoded by its mcpkit.Tool:
// validated once against the input schema, then decoded strictly, then
// checked by the argument type's Validate method for what a schema cannot
// say. Any failure is a refusal with CodeInvalidArgument naming what is
// wrong, never a guess. Arguments that are not a JSON object at all are a
// protocol fault (see server.go).

// The names arguments carry have one schema each, wherever they appear.
type (
	// InstanceName is an instance as Incus names it: a letter, then
	// letters, digits and '-', not ending in '-', at most 63 characters.
	InstanceName string
	// TaskID is t- and ten characters of a-z and 2-7.
	TaskID string
	// IdempotencyKey is 1 to 64 characters of A-Za-z0-9._:- (ISX-156..158).
	IdempotencyKey string
)

var (
	instanceNameSchema = mcpkit.TypeSchema{Type: reflect.TypeFor[InstanceName](), Schema: &jsonschema.Schema{
		Type: "string", Pattern: `^[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`, MaxLength: ptr(holding.MaxInstanceName)}}
	taskIDSchema = mcpkit.TypeSchema{Type: reflect.TypeFor[TaskID](), Schema: &jsonschema.Schema{
		Type: "string", Pattern: `^t-[a-z2-7]{10}$`}}
	idempotencyKeySchema = mcpkit.TypeSchema{Type: reflect.TypeFor[IdempotencyKey](), Schema: &jsonschema.Schema{
		Type: "string", Pattern: `^[A-Za-z0-9._:-]{1,64}$`, MinLength: ptr(1), MaxLength: ptr(64)}}
)

// keyOf is an optional idempotency key as the handlers use it, "" for none.
func keyOf(key *IdempotencyKey) string {
	if key == nil {
		return ""
	}
	return string(*key)
}

// Defaults of optional arguments; their bounds are tags on the arguments.
const (
	defaultTimeout = 600 // seconds a foreground exec may take by default
	defaultOutput  = 32 << 10
	defaultWaitAny = 60
)

// orDefault is an optional number argument, or def when it was not given.
func orDefault(value *int, def int) int {
	if value == nil {
		return def
	}
	return *value
}

// invalid is an argument the schema allows but isx does not.
func invalid(format string, args ...any) error {
	return refusef(CodeInvalidArgument, format, args...)
}

// invalidArguments is a refusal for arguments Tool.Decode did not accept.
func invalidArguments(err error) *coded.Error {
	if r, ok := err.(*coded.Error); ok {
		return r
	}
	return refusef(CodeInvalidArgument, "%s", err.Error())
}

// checkPurpose keeps the purpose to one line: isx list shows it.
func checkPurpose(purpose string) error {
	if strings.IndexFunc(purpose, unicode.IsControl) >= 0 {
		return invalid("purpose must be one line without control characters")
	}
	return nil
}
