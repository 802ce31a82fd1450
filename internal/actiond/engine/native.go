// Package native describes the native tools an MCP server can list without a
// registry action: their descriptions and input and output schemas. The
// runner executes them; the endpoint lists them.
package engine

import "github.com/incusspawn/isx/internal/actiond/action"

// Tool describes one native tool.
type Tool struct {
	Name         string
	Description  string
	InputSchema  map[string]any
	OutputSchema map[string]any
}

var tools = map[string]Tool{
	action.NativeGraphQL: {
		Name: action.NativeGraphQL,
		Description: "Runs one GraphQL operation against the platform's API as you, bounded by this server's policies. " +
			"Pass query (the document), and variables and operationName when the document needs them. " +
			"Answers with the operation's data; an error is a tool error naming what was denied or wrong.",
		InputSchema: object(map[string]any{
			"query":         map[string]any{"type": "string", "minLength": 1, "description": "The GraphQL document."},
			"variables":     map[string]any{"type": "object", "description": "Values for the document's variables."},
			"operationName": map[string]any{"type": "string", "description": "Which operation of the document to run."},
		}, "query"),
		OutputSchema: object(map[string]any{
			"data": map[string]any{"description": "The operation's data."},
		}, "data"),
	},
	action.NativeCEL: {
		Name: action.NativeCEL,
		Description: "Evaluates one CEL expression. The platform's functions are available (decimal, money, date, uuid, timestamp, " +
			"duration, strings), and so are uuid.New() and time.Now(). Pass expression, and variables: an object whose keys " +
			"become variables of the expression. Answers with value.",
		InputSchema: object(map[string]any{
			"expression": map[string]any{"type": "string", "minLength": 1, "description": "The CEL expression."},
			"variables":  map[string]any{"type": "object", "description": "Variables the expression reads, by name."},
		}, "expression"),
		OutputSchema: object(map[string]any{
			"value": map[string]any{"description": "The expression's value."},
		}, "value"),
	},
}

// Lookup describes a native tool the endpoint can run. A native this issue
// does not run yet (program, invoke, get_task, cancel_task) is not found, so
// a server listing it leaves it out.
func Lookup(name string) (Tool, bool) {
	t, ok := tools[name]
	return t, ok
}

func object(properties map[string]any, required ...string) map[string]any {
	schema := map[string]any{"type": "object", "properties": properties, "additionalProperties": false}
	if len(required) > 0 {
		list := make([]any, len(required))
		for i, r := range required {
			list[i] = r
		}
		schema["required"] = list
	}
	return schema
}
