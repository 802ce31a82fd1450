package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The _meta keys a 2026-07-28 request carries what a handshake used to say
// under.
const (
	metaVersionKey = "io.modelcontextprotocol/protocolVersion"
	metaCapsKey    = "io.modelcontextprotocol/clientCapabilities"
	metaClientKey  = "io.modelcontextprotocol/clientInfo"
)

// rpcRequest is one JSON-RPC message as the endpoint reads it, decoded once:
// its params as the client sent them, for the record, and as values, which
// the session mapping, the protocol checks and the method read.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`

	// decoded from params
	params  map[string]any
	meta    map[string]any
	name    string // params.name, params.uri or params.taskId
	version string // the protocol version the request speaks
	// truncated is the kept prefix of a request too large to record.
	truncated string
}

func (r *rpcRequest) isCall() bool { return len(r.ID) > 0 && string(r.ID) != "null" }

// hasParams says whether the request carries params at all ("params": null
// carries none).
func (r *rpcRequest) hasParams() bool { return len(r.Params) > 0 && string(r.Params) != "null" }

// decode reads one request and the checks that come before its token: a
// request failing them is refused and not recorded. params is decoded once,
// into the values every later step reads.
func decode(body []byte, header http.Header) (*rpcRequest, *rpcError) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "batches are not supported"})
	}
	if reason := ambiguousMember(trimmed); reason != "" {
		return nil, newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": reason})
	}
	var req rpcRequest
	if err := json.Unmarshal(body, &req); err != nil || req.JSONRPC != "2.0" || req.Method == "" {
		return nil, newError(-32700, errBadRequest, http.StatusBadRequest, nil)
	}
	if req.hasParams() {
		if err := json.Unmarshal(req.Params, &req.params); err != nil {
			return &req, newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "params must be an object"})
		}
	}
	req.meta, _ = req.params["_meta"].(map[string]any)
	switch req.Method {
	case "resources/read":
		req.name = req.param("uri")
	case "tasks/get", "tasks/update", "tasks/cancel":
		req.name = req.param("taskId")
	default:
		req.name = req.param("name")
	}
	if rerr := checkVersion(&req, header, req.param("protocolVersion")); rerr != nil {
		return &req, rerr
	}
	return &req, checkHeaders(&req, header)
}

// members are the request's members the endpoint reads.
var members = []string{"jsonrpc", "id", "method", "params"}

// ambiguousMember says why a request object names one of members twice or
// in another case, or "". encoding/json matches names regardless of case
// and keeps the last of a repeated one, while the SDK that serves the same
// body matches them exactly: {"id":1,"Id":null} would be checked here as a
// notification and served there as a call.
func ambiguousMember(body []byte) string {
	decoder := json.NewDecoder(bytes.NewReader(body))
	if token, err := decoder.Token(); err != nil || token != json.Delim('{') {
		return "" // not an object: refused as malformed
	}
	seen := map[string]bool{}
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			return ""
		}
		key, _ := token.(string)
		for _, member := range members {
			if !strings.EqualFold(key, member) {
				continue
			}
			if key != member {
				return "member " + strconv.Quote(key) + " is not " + strconv.Quote(member) + ": JSON-RPC names its members in lowercase"
			}
			if seen[member] {
				return "member " + strconv.Quote(member) + " is given twice"
			}
			seen[member] = true
		}
		var value json.RawMessage
		if err := decoder.Decode(&value); err != nil {
			return ""
		}
	}
	return ""
}

// param is a string member of params, "" when absent or not a string.
func (r *rpcRequest) param(name string) string {
	s, _ := r.params[name].(string)
	return s
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
		return missingMeta(metaVersionKey, "Put the protocol version in params._meta[\""+metaVersionKey+"\"] too, the same as the Mcp-Protocol-Version header.")
	}
	if req.version >= newProtocol && req.isCall() {
		// The SDK would refuse it too, with a bare -32602 and no data.
		if _, ok := req.meta[metaCapsKey].(map[string]any); !ok {
			return missingMeta(metaCapsKey, "Put the client's capabilities in params._meta[\""+metaCapsKey+"\"] of every request: an object, {} when the client declares none. "+
				newProtocol+" has no handshake to say them once.")
		}
	}
	return nil
}

// missingMeta refuses a request that lacks a _meta member every request
// of the revision carries, saying which and what to send.
func missingMeta(key, hint string) *rpcError {
	rerr := newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, map[string]any{"reason": "missing _meta " + key, "field": "params._meta." + key})
	rerr.Hint = hint
	rerr.Data["hint"] = hint
	return rerr
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

// recordedParams are the params as the record keeps them: as the client
// sent them, unless they hold bytes that are not UTF-8, which the decoded
// values replaced and a database's text would refuse.
func (r *rpcRequest) recordedParams() json.RawMessage {
	if !r.hasParams() {
		return nil
	}
	if utf8.Valid(r.Params) {
		return r.Params
	}
	out, _ := json.Marshal(r.params)
	return out
}

// peek reads the id and method of a request from a prefix of its body,
// which may end anywhere: the members before params are read, the rest is
// left. The protocol version comes from the header.
func peek(prefix []byte, header http.Header) *rpcRequest {
	req := &rpcRequest{JSONRPC: "2.0", version: header.Get("Mcp-Protocol-Version"), truncated: string(prefix)}
	decoder := json.NewDecoder(bytes.NewReader(prefix))
	if token, err := decoder.Token(); err != nil || token != json.Delim('{') {
		return req
	}
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			return req
		}
		var value json.RawMessage
		if err := decoder.Decode(&value); err != nil {
			return req
		}
		switch token {
		case "id":
			req.ID = value
		case "method":
			json.Unmarshal(value, &req.Method)
		}
	}
	return req
}
