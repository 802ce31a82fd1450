package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkjson "github.com/segmentio/encoding/json"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// The endpoint answers the stateless methods — tools, resources, prompts,
// the Tasks and Skills extensions — itself, from the request it decoded
// once. What the SDK's Streamable HTTP transport and server check of a
// request before a method sees it is checked here, in the SDK's order and
// with its answers, so that a client cannot tell the two apart: the
// transport's HTTP refusals (plain text), the protocol's header rules
// (-32020), and the per-request _meta and params of the 2026-07-28
// revision (-32602). Discovery and the handshake are still the SDK's
// (sdk.go).

// plainAnswer is an HTTP refusal in plain text, as http.Error writes it.
type plainAnswer struct {
	status int
	text   string
}

// checkTransport is what the transport refuses before reading the message:
// a body that is not JSON, a client that cannot read both answers a
// Streamable HTTP server may give, and a POST resuming a stream.
func checkTransport(header http.Header) *plainAnswer {
	if mediaType, _, _ := mime.ParseMediaType(header.Get("Content-Type")); mediaType != "application/json" {
		return &plainAnswer{http.StatusUnsupportedMediaType, "Content-Type must be 'application/json'"}
	}
	if jsonOK, streamOK := accepts(header.Values("Accept")); !jsonOK || !streamOK {
		return &plainAnswer{http.StatusBadRequest, "Accept must contain both 'application/json' and 'text/event-stream'"}
	}
	if len(header.Values("Last-Event-ID")) > 0 {
		return &plainAnswer{http.StatusBadRequest, "can't send Last-Event-ID for POST request"}
	}
	return nil
}

// accepts says whether an Accept header takes JSON and server-sent events;
// a wildcard takes both.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, value := range values {
		for _, part := range strings.Split(value, ",") {
			mediaType := strings.TrimSpace(strings.SplitN(part, ";", 2)[0])
			switch mediaType {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// checkMessage is what the transport and the server check of a call's
// message before its method runs: its id, its params' presence, the name
// header of the methods that name something, the client's _meta, and that
// the params decode as the method's. It answers with the refusal, plain or
// JSON-RPC, or with nothing when the method may run.
func checkMessage(header http.Header, req *rpcRequest) (*plainAnswer, *wireError) {
	if kind := idKind(req.ID); kind != "" {
		return &plainAnswer{http.StatusBadRequest, "malformed payload: parse error: invalid ID type " + kind}, nil
	}
	spec := methodParams[req.Method]
	if !spec.optional && len(req.Params) == 0 {
		return &plainAnswer{http.StatusBadRequest, `invalid request: missing required "params"`}, nil
	}
	if req.version >= newProtocol {
		if spec.named {
			if header.Get("Mcp-Name") == "" {
				return nil, headerError(fmt.Sprintf("missing required Mcp-Name header for method %q", req.Method))
			}
			if spec.unusual(req.params) && decodeParams(req, spec.named2026()) != nil {
				return nil, headerError(fmt.Sprintf("failed to extract name from parameters for method %q", req.Method))
			}
		}
		if werr := checkMeta(req.meta); werr != nil {
			return nil, werr
		}
	}
	if !spec.optional && !req.hasParams() {
		return nil, &wireError{Code: -32600, Message: fmt.Sprintf("handling '%s': invalid request: missing required \"params\"", req.Method), status: http.StatusOK}
	}
	if spec.unusual(req.params) {
		target := spec.decoded()
		if err := decodeParams(req, target); err != nil {
			return nil, &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("handling '%s': invalid params: unmarshaling %q into a %T: %v", req.Method, req.Params, target, err)}
		}
	}
	return nil, nil
}

// idKind is the Go type the SDK names when a call's id is neither a string
// nor a number, or "" for one it takes.
func idKind(id json.RawMessage) string {
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return ""
	case '{':
		return "map[string]interface {}"
	case '[':
		return "[]interface {}"
	case 't', 'f':
		return "bool"
	}
	return "<nil>"
}

// wireError is a JSON-RPC error of the protocol rather than of the
// platform: a code and the SDK's message, and no data. The record keeps it
// as it was sent.
type wireError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	// status is the HTTP status it is sent with when the revision's rule
	// does not decide it (headerError).
	status int
}

// headerError is the -32020 of a request whose MCP headers do not say what
// its body does, sent with HTTP 400 at every revision.
func headerError(message string) *wireError {
	return &wireError{Code: codeHeaderMismatch, Message: message, status: http.StatusBadRequest}
}

// checkMeta validates the client's _meta of a 2026-07-28 call as the SDK
// does: clientInfo, when present, an implementation; clientCapabilities
// required, and capabilities.
func checkMeta(meta map[string]any) *wireError {
	if info, present := meta[metaClientKey]; present && !usualClientInfo(info) && remarshal(info, new(*mcp.Implementation)) != nil {
		return &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("invalid _meta field %q", metaClientKey)}
	}
	caps := meta[metaCapsKey]
	if caps == nil || !usualCapabilities(caps) && remarshal(caps, new(capabilities)) != nil {
		return &wireError{Code: codeInvalidParams, Message: fmt.Sprintf("missing or invalid _meta field %q", metaCapsKey)}
	}
	return nil
}

// capabilities are client capabilities as the SDK reads them from _meta:
// roots as an object of its own.
type capabilities struct {
	mcp.ClientCapabilities
	Roots *mcp.RootCapabilities `json:"roots,omitempty"`
}

// usualClientInfo says whether clientInfo is what clients send, an object
// of strings the SDK takes, so that it need not be decoded to be checked.
func usualClientInfo(info any) bool {
	m, ok := info.(map[string]any)
	if !ok {
		return false
	}
	for key, value := range m {
		switch key {
		case "name", "title", "description", "version", "websiteUrl":
			if _, ok := value.(string); !ok && value != nil {
				return false
			}
		case "icons":
			return false
		}
	}
	return true
}

// usualCapabilities says whether capabilities hold only extensions and
// experimental settings, which take any object.
func usualCapabilities(caps any) bool {
	m, ok := caps.(map[string]any)
	if !ok {
		return false
	}
	for key, value := range m {
		switch key {
		case "extensions", "experimental":
			if _, ok := value.(map[string]any); !ok && value != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func remarshal(value, into any) error {
	b, err := json.Marshal(value)
	if err != nil {
		return err
	}
	return sdkDecode(b, into)
}

// decodeParams decodes the params as the SDK would, to check them.
func decodeParams(req *rpcRequest, into any) error {
	if !req.hasParams() {
		return nil
	}
	return sdkDecode(req.Params, into)
}

// sdkDecode decodes as the SDK does — its decoder, matching member names
// exactly — so that what it refuses, and the words it refuses with, are
// the SDK's own.
func sdkDecode(data []byte, into any) error {
	decoder := sdkjson.NewDecoder(bytes.NewReader(data))
	decoder.DontMatchCaseInsensitiveStructFields()
	return decoder.Decode(into)
}

// paramSpec is what the endpoint knows of a method's params: whether they
// may be left out, whether the method names something in Mcp-Name, and
// the members its requests usually carry, each with the kind of value the
// SDK's type takes. Params with anything else are decoded into that type
// to be checked, so that only an unusual request pays for a second decode.
type paramSpec struct {
	optional bool
	named    bool
	usual    map[string]valueKind
	// decoded is a new value of the SDK's params type.
	decoded func() any
}

type valueKind int

const (
	anyValue valueKind = iota
	stringValue
	objectValue
	stringsValue // an object of strings
)

func (s paramSpec) unusual(params map[string]any) bool {
	for key, value := range params {
		kind, known := s.usual[key]
		if !known && key != "_meta" {
			return true
		}
		if key == "_meta" {
			kind = objectValue
		}
		if value == nil {
			continue
		}
		switch kind {
		case stringValue:
			if _, ok := value.(string); !ok {
				return true
			}
		case objectValue:
			if _, ok := value.(map[string]any); !ok {
				return true
			}
		case stringsValue:
			m, ok := value.(map[string]any)
			if !ok {
				return true
			}
			for _, v := range m {
				if _, ok := v.(string); !ok {
					return true
				}
			}
		}
	}
	return false
}

// named2026 is the type the transport decodes a named method's params into
// to read the name: the SDK's params type with arguments decoded.
func (s paramSpec) named2026() any {
	switch v := s.decoded().(type) {
	case *mcp.CallToolParamsRaw:
		return new(mcp.CallToolParams)
	default:
		return v
	}
}

var (
	listing = func(decoded func() any) paramSpec {
		return paramSpec{optional: true, usual: map[string]valueKind{"cursor": stringValue}, decoded: decoded}
	}
	taskParams = paramSpec{optional: true, usual: map[string]valueKind{"taskId": stringValue}, decoded: func() any { return new(mcpkit.TaskParams) }}
)

// methodParams are the methods the endpoint answers itself.
var methodParams = map[string]paramSpec{
	"tools/list":               listing(func() any { return new(mcp.ListToolsParams) }),
	"resources/list":           listing(func() any { return new(mcp.ListResourcesParams) }),
	"resources/templates/list": listing(func() any { return new(mcp.ListResourceTemplatesParams) }),
	"prompts/list":             listing(func() any { return new(mcp.ListPromptsParams) }),
	mcpkit.MethodListSkills:    listing(func() any { return new(mcpkit.ListSkillsParams) }),
	"tools/call": {named: true, usual: map[string]valueKind{"name": stringValue, "arguments": anyValue},
		decoded: func() any { return new(mcp.CallToolParamsRaw) }},
	"resources/read": {named: true, usual: map[string]valueKind{"uri": stringValue},
		decoded: func() any { return new(mcp.ReadResourceParams) }},
	"prompts/get": {named: true, usual: map[string]valueKind{"name": stringValue, "arguments": stringsValue},
		decoded: func() any { return new(mcp.GetPromptParams) }},
	mcpkit.MethodGetSkill: {optional: true, usual: map[string]valueKind{"uri": stringValue},
		decoded: func() any { return new(mcpkit.GetSkillParams) }},
	mcpkit.MethodGetTask:    taskParams,
	mcpkit.MethodCancelTask: taskParams,
	mcpkit.MethodUpdateTask: {optional: true, usual: map[string]valueKind{"taskId": stringValue, "inputResponses": objectValue},
		decoded: func() any { return new(mcpkit.UpdateTaskParams) }},
}

// answersItself says whether the endpoint answers a method itself, rather
// than the SDK.
func answersItself(method string) bool {
	_, ok := methodParams[method]
	return ok
}
