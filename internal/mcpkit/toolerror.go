package mcpkit

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolError is a call that did not do what was asked, told to the model as
// a tool result with isError so that it can correct itself: no
// structuredContent, the reason in text, and the code under the server's
// own _meta key.
type ToolError struct {
	Code    string
	Message string
	Hint    string
	// Facts are further fields of the _meta entry (isx's instance and
	// task_id); they never replace code, message or hint.
	Facts map[string]any
}

// ErrorStyle is how one server renders tool errors.
type ErrorStyle struct {
	// MetaKey is the _meta key the details go under, such as
	// "dev.incusspawn/error" or "com.twisp/error".
	MetaKey string
	// Text is what the model reads.
	Text func(e ToolError) string
	// AlwaysHint puts hint in _meta even when it is empty.
	AlwaysHint bool
}

// Result renders the error.
func (s ErrorStyle) Result(e ToolError) *mcp.CallToolResult {
	details := map[string]any{}
	for k, v := range e.Facts {
		details[k] = v
	}
	details["code"], details["message"] = e.Code, e.Message
	if e.Hint != "" || s.AlwaysHint {
		details["hint"] = e.Hint
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: s.Text(e)}},
		Meta:    mcp.Meta{s.MetaKey: details},
	}
}

// Of reads a tool error back from a result rendered in this style: for an
// audit log, a record, or a test.
func (s ErrorStyle) Of(res *mcp.CallToolResult) (ToolError, bool) {
	if res == nil || !res.IsError {
		return ToolError{}, false
	}
	details, ok := res.Meta[s.MetaKey].(map[string]any)
	if !ok {
		return ToolError{}, false
	}
	e := ToolError{Facts: map[string]any{}}
	for k, v := range details {
		switch k {
		case "code":
			e.Code, _ = v.(string)
		case "message":
			e.Message, _ = v.(string)
		case "hint":
			e.Hint, _ = v.(string)
		default:
			e.Facts[k] = v
		}
	}
	return e, true
}
