package gateway

import (
	"encoding/json"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// JSON-RPC error codes the endpoint answers with.
const (
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeInternal           = -32603
	codeHeaderMismatch     = -32020
	codeMissingCapability  = -32021
	codeUnsupportedVersion = -32022
	codeUnauthorized       = -32001
)

// The platform's error identifiers, carried in error.data.code.
const (
	errServerNotFound     = "mcp_server_not_found"
	errSessionInvalid     = "mcp_session_invalid"
	errRequestMismatched  = "mcp_request_mismatched"
	errSessionClosed      = "session_closed"
	errRateLimited        = "mcp_rate_limited"
	errTransaction        = "mcp_transaction_error"
	errDeadline           = "mcp_request_deadline"
	errToolNotDeclared    = engine.CodeToolNotDeclared
	errTaskNotFound       = "mcp_task_not_found"
	errTaskRequired       = "mcp_task_required"
	errMethodNotFound     = "mcp_method_not_found"
	errForbidden          = "mcp_forbidden"
	errUnauthorized       = "mcp_unauthorized"
	errTooLarge           = "mcp_request_too_large"
	errNotRecorded        = "mcp_record_failed"
	errInternal           = "mcp_internal_error"
	errBadRequest         = "mcp_bad_request"
	errIntentRequired     = "intent_required"
	errIntentInvalid      = "intent_invalid"
	errInputInvalid       = engine.CodeInputInvalid
	errOutputInvalid      = engine.CodeOutputInvalid
	errToolUnavailable    = "tool_unavailable"
	errToolFailed         = engine.CodeFailure
	errAccessDenied       = "ACCESS_DENIED"
	errUnsupportedVersion = "mcp_unsupported_version"
	errHeaderMismatch     = "mcp_header_mismatch"
	// errAbandoned is what another process records for a request whose
	// process stopped serving it (package tasks).
	errAbandoned = "mcp_request_abandoned"
)

// messages are the fixed sentence of each code: an error's message never
// depends on the request; what the request named goes in error.data.
var messages = map[string]string{
	errServerNotFound:     "No MCP server of that name can be reached at this endpoint.",
	errSessionInvalid:     "This session's input no longer matches how the server maps requests to sessions; the session must be closed before it can be used again.",
	errRequestMismatched:  "The request does not carry what this server groups its sessions by.",
	errSessionClosed:      "This session is closed.",
	errRateLimited:        "This session made too many calls in the last minute.",
	errTransaction:        "The request could not be admitted while many requests wanted the same session; retry it.",
	errDeadline:           "The request passed the server's response timeout.",
	errToolNotDeclared:    "This server does not offer that tool.",
	errTaskNotFound:       "No such task can be reached from this session.",
	errTaskRequired:       "This call runs as a task, which needs the MCP Tasks extension.",
	errMethodNotFound:     "This server does not serve that method.",
	errForbidden:          "The principal may not invoke this MCP server.",
	errUnauthorized:       "A valid bearer token for this region's MCP endpoints is required.",
	errTooLarge:           "The request is too large to record.",
	errNotRecorded:        "The request's record could not be committed, so its result was not sent.",
	errInternal:           "The server failed to serve the request.",
	errBadRequest:         "The request is not a valid MCP request.",
	errUnsupportedVersion: "The request's protocol version is not supported.",
	errHeaderMismatch:     "The request's MCP headers do not match its body.",
}

// hints say what the caller can do next: every code has one.
var hints = map[string]string{
	errServerNotFound:     "Check the server's name in the endpoint's URL, and that you may read it; a disabled server is not reachable.",
	errTaskNotFound:       "Use a taskId that a call in this session returned.",
	errMethodNotFound:     "Call server/discover (or initialize) for what this server offers.",
	errUnauthorized:       "Sign in again, or send a bearer token whose aud is this region's MCP endpoints.",
	errInternal:           "Retry the request; if it keeps failing, ask the operator to read actiond's log.",
	errBadRequest:         "Send one JSON-RPC 2.0 request object with its method and params.",
	errUnsupportedVersion: "Speak one of the protocol versions in data.supported.",
	errHeaderMismatch:     "Send Mcp-Protocol-Version, Mcp-Method and Mcp-Name headers that repeat what the body says.",
	errSessionInvalid:     "Ask the server's owner to close the session with closeSession, or to include every field of mcp.session.start.input in session.id.",
	errRequestMismatched:  "Send the _meta fields the server's session mapping reads.",
	errSessionClosed:      "Start a new conversation or ask the server's owner why the session was closed.",
	errRateLimited:        "Wait for the time in Retry-After before the next request.",
	errTransaction:        "Retry the request unchanged.",
	errDeadline:           "Make the call do less, or ask the server's owner to raise execution.responseTimeout.",
	errToolNotDeclared:    "Call tools/list for the tools this server offers.",
	errTaskRequired:       "Declare the io.modelcontextprotocol/tasks extension in the request's client capabilities, or use a server that lists get_task and cancel_task.",
	errForbidden:          "Ask an administrator for INVOKE on this server's action.",
	errNotRecorded:        "Retry the request; nothing it did was committed.",
	errTooLarge:           "Send a smaller request.",
}

// rpcError is a JSON-RPC error with the platform's code in data. Its coded
// part is the platform's: Code is the identifier sent as error.data.code,
// Message and Hint its fixed sentences.
type rpcError struct {
	coded.Base
	// RPC is the JSON-RPC error code.
	RPC     int64
	Status  int
	Data    map[string]any
	Headers map[string]string
	// Detail is what went wrong in detail: recorded on the execution's
	// invocation.error, never sent.
	Detail any
}

func newError(rpc int64, code string, status int, data map[string]any) *rpcError {
	if data == nil {
		data = map[string]any{}
	}
	message, ok := messages[code]
	if !ok {
		message = messages[errInternal]
	}
	hint := hints[code]
	data["code"] = code
	if hint != "" {
		data["hint"] = hint
	}
	return &rpcError{Base: coded.Base{Code: code, Message: message, Hint: hint}, RPC: rpc, Status: status, Data: data}
}

// jsonrpc turns the error into the SDK's wire type, for returning from a
// method handler.
func (e *rpcError) jsonrpc() *jsonrpc.Error {
	data, _ := json.Marshal(e.Data)
	return &jsonrpc.Error{Code: e.RPC, Message: e.Message, Data: data}
}

// write sends the error as a whole HTTP response.
func (e *rpcError) write(w http.ResponseWriter, id json.RawMessage) {
	for k, v := range e.Headers {
		w.Header().Set(k, v)
	}
	writeJSON(w, e.Status, errorBody(id, e))
}

func errorBody(id json.RawMessage, e *rpcError) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   any             `json:"error"`
	}{"2.0", id, e.wire()})
	return body
}

// wire is the error object as it is sent.
func (e *rpcError) wire() map[string]any {
	return map[string]any{"code": e.RPC, "message": e.Message, "data": e.Data}
}

// recorded is the error as the request's execution keeps it.
func (e *rpcError) recorded() json.RawMessage {
	out, _ := json.Marshal(map[string]any{"code": e.Code, "message": e.Message, "jsonrpc": e.RPC, "data": e.Data})
	return out
}

// invocationEntry is the error as the request's invocation tells it, with
// what the endpoint knows besides.
func (e *rpcError) invocationEntry(details any) map[string]any {
	if e.Detail != nil {
		merged := map[string]any{"cause": e.Detail}
		if m, ok := details.(map[string]any); ok {
			for k, v := range m {
				merged[k] = v
			}
		} else if details != nil {
			merged["details"] = details
		}
		details = merged
	}
	return map[string]any{"code": e.Code, "message": e.Message, "details": details}
}

// toolErrors renders a call that did not do what was asked as a tool result
// with isError, which the external agent can read and act on: the message
// and its hint as text, and code, message and hint (always, even when
// empty) under com.twisp/error in _meta.
var toolErrors = mcpkit.ErrorStyle{
	MetaKey:    "com.twisp/error",
	AlwaysHint: true,
	Text: func(e mcpkit.ToolError) string {
		if e.Hint == "" {
			return e.Message
		}
		return e.Message + "\nHint: " + e.Hint
	},
}

// toolError renders a tool error.
func toolError(code, message, hint string) *mcp.CallToolResult {
	return toolErrors.Result(mcpkit.ToolError{Code: code, Message: message, Hint: hint})
}
