package mcpserve

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
)

// Protocol revisions the endpoint serves. 2024-11-05 is refused.
var supportedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"}

const (
	newProtocol    = "2026-07-28"
	metaVersionKey = "io.modelcontextprotocol/protocolVersion"
	metaCapsKey    = "io.modelcontextprotocol/clientCapabilities"
	metaClientKey  = "io.modelcontextprotocol/clientInfo"
	tasksExtension = "io.modelcontextprotocol/tasks"
)

// rpcRequest is one JSON-RPC message as the endpoint reads it: decoded once,
// params kept raw for the SDK and for the record.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`

	// decoded from params
	meta      map[string]any
	name      string // params.name, params.uri or params.taskId
	arguments map[string]any
	version   string // the protocol version the request speaks
}

func (r *rpcRequest) isCall() bool { return len(r.ID) > 0 && string(r.ID) != "null" }

// paramsView holds the parts of params the endpoint looks at before the SDK.
type paramsView struct {
	Meta      map[string]any `json:"_meta"`
	Name      string         `json:"name"`
	URI       string         `json:"uri"`
	TaskID    string         `json:"taskId"`
	Arguments map[string]any `json:"arguments"`
	Version   string         `json:"protocolVersion"`
}

// decode reads one request and the checks that come before its token: a
// request failing them is refused and not recorded.
func decode(body []byte, header http.Header) (*rpcRequest, *rpcError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "batches are not supported"})
	}
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || req.Method == "" {
		return nil, newError(-32700, errBadRequest, http.StatusBadRequest, nil)
	}
	var view paramsView
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &view); err != nil {
			return &req, newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "params must be an object"})
		}
	}
	req.meta, req.arguments = view.Meta, view.Arguments
	switch req.Method {
	case "resources/read":
		req.name = view.URI
	case "tasks/get", "tasks/update", "tasks/cancel":
		req.name = view.TaskID
	default:
		req.name = view.Name
	}
	if rerr := checkVersion(&req, header, view.Version); rerr != nil {
		return &req, rerr
	}
	return &req, checkHeaders(&req, header)
}

// checkVersion finds the revision a request speaks and refuses one the
// endpoint does not serve, or whose header and _meta disagree.
func checkVersion(req *rpcRequest, header http.Header, initializeVersion string) *rpcError {
	headerVersion := header.Get("Mcp-Protocol-Version")
	metaVersion, _ := req.meta[metaVersionKey].(string)
	switch {
	case metaVersion != "":
		if headerVersion != metaVersion {
			return newError(codeHeaderMismatch, errHeaderMismatch, http.StatusBadRequest, map[string]any{"header": "Mcp-Protocol-Version"})
		}
		req.version = metaVersion
	case headerVersion != "":
		req.version = headerVersion
	case req.Method == "initialize":
		// The handshake negotiates; the SDK answers with a version we serve.
		req.version = initializeVersion
		return nil
	default:
		req.version = "2025-03-26" // what a request with no version header speaks
	}
	if !slices.Contains(supportedVersions, req.version) {
		return newError(codeUnsupportedVersion, errUnsupportedVersion, http.StatusBadRequest,
			map[string]any{"supported": supportedVersions, "requested": req.version})
	}
	if req.version >= newProtocol && req.isCall() && metaVersion == "" {
		return newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "missing _meta " + metaVersionKey})
	}
	return nil
}

// checkHeaders applies the 2026-07-28 rule that Mcp-Method and Mcp-Name repeat
// what the body says.
func checkHeaders(req *rpcRequest, header http.Header) *rpcError {
	if req.version < newProtocol || !req.isCall() {
		return nil
	}
	mismatch := func(name string) *rpcError {
		return newError(codeHeaderMismatch, errHeaderMismatch, http.StatusBadRequest, map[string]any{"header": name})
	}
	if header.Get("Mcp-Method") != req.Method {
		return mismatch("Mcp-Method")
	}
	switch req.Method {
	case "tools/call", "resources/read", "prompts/get", "tasks/get", "tasks/update", "tasks/cancel":
		if header.Get("Mcp-Name") != req.name {
			return mismatch("Mcp-Name")
		}
	}
	return nil
}

// hasExtension says whether the request's client capabilities declare an
// extension. Older revisions carry capabilities only in initialize, which
// a stateless server never sees again, so they never declare one.
func (r *rpcRequest) hasExtension(name string) bool {
	caps, _ := r.meta[metaCapsKey].(map[string]any)
	exts, _ := caps["extensions"].(map[string]any)
	_, ok := exts[name]
	return ok
}

// clientInfo is what the request says of the client, for the record only.
func (r *rpcRequest) clientInfo() any { return r.meta[metaClientKey] }
