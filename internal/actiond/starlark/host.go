package starlark

import "context"

// Host is what a script reaches outside itself. The caller (the tool executor
// or the MCP endpoint) implements it, authorizes and records every call, and
// decides which tools and natives the script may use.
//
// Values crossing the boundary are JSON-able Go values: nil, bool, string,
// float64, int64, json.Number, map[string]any and []any (other numeric kinds
// and JSON-marshalable types are accepted from the host too).
//
// A call that fails the way a tool fails (a denial, invalid input, a failed
// tool) must be returned as *Error with the tool's code, message and hint: a
// script can catch it with check=False, and otherwise it ends the script with
// that code. Any other error is a failure of the host itself: it ends the
// script, cannot be caught, and Run returns it wrapped.
type Host interface {
	// HasTool reports whether the script may call tools.<name>.
	HasTool(name string) bool
	// HasNative reports whether the builtin of that name, NativeGraphQL or
	// NativeCEL, may be called.
	HasNative(name string) bool
	CallTool(ctx context.Context, name string, input any) (output any, err error)
	// GraphQL runs one document and returns the value the script receives
	// (the response's data); GraphQL errors are returned as *Error.
	GraphQL(ctx context.Context, request GraphQLRequest) (data any, err error)
	// CEL evaluates one expression in the platform's CEL environment, with the
	// clock and randomness functions that scripts do not have as builtins.
	CEL(ctx context.Context, expression string, vars map[string]any) (value any, err error)
}

// The natives a script reaches through builtins rather than tools.<name>.
const (
	NativeGraphQL = "graphql"
	NativeCEL     = "cel"
)

// GraphQLRequest is one graphql() call of a script.
type GraphQLRequest struct {
	Document      string
	Variables     map[string]any // nil when the script passed none
	OperationName string         // "" when the script passed none
}
