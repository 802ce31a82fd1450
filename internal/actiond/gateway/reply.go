package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// bufferedResponse holds the SDK's reply until the record commits.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
	parsed *replyView
}

func newBufferedResponse() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}, status: http.StatusOK}
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }

func (b *bufferedResponse) WriteHeader(status int) { b.status = status }

// replaceWith makes the buffered reply a JSON-RPC error.
func (b *bufferedResponse) replaceWith(rerr *rpcError, id json.RawMessage) {
	b.header = http.Header{"Content-Type": []string{"application/json"}}
	b.status = rerr.Status
	b.body.Reset()
	b.body.Write(errorBody(id, rerr))
	b.parsed = nil
}

func (b *bufferedResponse) flushTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(b.body.Len()))
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}

type replyView struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// reply is the buffered reply's result or error, decoded once.
func (b *bufferedResponse) reply() replyView {
	if b.parsed == nil {
		b.parsed = &replyView{}
		json.Unmarshal(b.body.Bytes(), b.parsed)
	}
	return *b.parsed
}

func (b *bufferedResponse) isJSONRPCError() bool { return len(b.reply().Error) > 0 }

// resultOrError is what the request answered, for its record.
func (b *bufferedResponse) resultOrError() json.RawMessage {
	v := b.reply()
	if len(v.Result) > 0 {
		return v.Result
	}
	if len(v.Error) > 0 {
		out, _ := json.Marshal(map[string]json.RawMessage{"error": v.Error})
		return out
	}
	if b.body.Len() == 0 {
		return nil
	}
	out, _ := json.Marshal(map[string]string{"raw": fmt.Sprintf("%.4096s", b.body.String())})
	return out
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
