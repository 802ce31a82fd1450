package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// reply is a request's answer as it is sent — status, headers, body — and
// what its record keeps of it: the JSON-RPC result or error the body
// carries. It is made once, before the record commits, and sent after.
type reply struct {
	status int
	header http.Header
	body   []byte
	// result and rpcError are the body's JSON-RPC result or error.
	result, rpcError json.RawMessage
}

// succeeded says whether the answer is a JSON-RPC result (or a
// notification's acceptance), rather than an error or a plain refusal.
func (rep *reply) succeeded() bool {
	return len(rep.result) > 0 || rep.status == http.StatusAccepted && len(rep.body) == 0
}

// output is what the request answered, for its record.
func (rep *reply) output() json.RawMessage {
	switch {
	case len(rep.result) > 0:
		return rep.result
	case len(rep.rpcError) > 0:
		out, _ := json.Marshal(map[string]json.RawMessage{"error": rep.rpcError})
		return out
	case len(rep.body) == 0:
		return nil
	}
	out, _ := json.Marshal(map[string]string{"raw": fmt.Sprintf("%.4096s", rep.body)})
	return out
}

func (rep *reply) send(w http.ResponseWriter) {
	for k, v := range rep.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(rep.body)))
	w.WriteHeader(rep.status)
	w.Write(rep.body)
}

// jsonHeader is the header of a JSON answer; streamed adds what the SDK's
// transport sets on the answers of a method it ran.
func jsonHeader(streamed bool) http.Header {
	h := http.Header{"Content-Type": []string{"application/json"}}
	if streamed {
		h["Cache-Control"] = []string{"no-cache, no-transform"}
	}
	return h
}

// resultReply frames a result: encoded once, the record keeps the same
// bytes the client gets.
func resultReply(id json.RawMessage, result any) (*reply, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, err
	}
	body := make([]byte, 0, len(raw)+len(id)+40)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"result":`...)
	body = append(body, raw...)
	body = append(body, '}')
	return &reply{status: http.StatusOK, header: jsonHeader(true), body: body, result: raw}, nil
}

// rpcErrorReply frames a JSON-RPC error object.
func rpcErrorReply(id json.RawMessage, status int, streamed bool, wire any) *reply {
	raw, _ := json.Marshal(wire)
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	body := make([]byte, 0, len(raw)+len(id)+40)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"error":`...)
	body = append(body, raw...)
	body = append(body, '}')
	return &reply{status: status, header: jsonHeader(streamed), body: body, rpcError: raw}
}

// plainReply is an HTTP refusal in plain text, as http.Error writes it.
func plainReply(p *plainAnswer) *reply {
	header := http.Header{"Content-Type": []string{"text/plain; charset=utf-8"}, "X-Content-Type-Options": []string{"nosniff"}}
	return &reply{status: p.status, header: header, body: []byte(p.text + "\n")}
}

// errorStatus is the HTTP status of a JSON-RPC error at the request's
// revision: from 2026-07-28 on, method not found is 404 and invalid params,
// an unsupported version and a missing capability are 400 (SEP-2575); a
// missing capability is 400 at every revision.
func (ex *exchange) errorStatus(code int64) int {
	if code == codeMissingCapability {
		return http.StatusBadRequest
	}
	if ex.req.version >= newProtocol {
		switch code {
		case codeMethodNotFound:
			return http.StatusNotFound
		case codeInvalidParams, codeUnsupportedVersion:
			return http.StatusBadRequest
		}
	}
	return http.StatusOK
}

// errorReply frames a platform error a method answered with.
func (ex *exchange) errorReply(rerr *rpcError) *reply {
	return rpcErrorReply(ex.req.ID, ex.errorStatus(rerr.RPC), true, rerr.wire())
}

// wireErrorReply frames a protocol error: one the transport answers
// before a method runs has a status of its own.
func (ex *exchange) wireErrorReply(werr *wireError) *reply {
	if werr.status != 0 {
		return rpcErrorReply(ex.req.ID, werr.status, false, werr)
	}
	return rpcErrorReply(ex.req.ID, ex.errorStatus(werr.Code), true, werr)
}

// bufferedResponse holds the SDK's answer to discovery and the handshake,
// until the record commits.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newBufferedResponse() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}, status: http.StatusOK}
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedResponse) WriteHeader(status int) { b.status = status }

// reply is the SDK's answer, with the result or error it carries.
func (b *bufferedResponse) reply() *reply {
	rep := &reply{status: b.status, header: b.header, body: b.body.Bytes()}
	var view struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(rep.body, &view) == nil {
		rep.result, rep.rpcError = view.Result, view.Error
	}
	return rep
}

// resultBody frames a result as a JSON-RPC response.
func resultBody(id json.RawMessage, result any) []byte {
	body, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	return body
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}
