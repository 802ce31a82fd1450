package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// FuzzDecodeRequest: the endpoint's reading of a request body and its MCP
// headers never panics; a refusal is an error whose code has its fixed
// message and a hint, sent as one JSON-RPC error object that echoes the
// request's id; an accepted request speaks a served revision and survives
// a round trip through its own JSON unchanged. peek, which reads the
// prefix of a request too large to decode, agrees with decode on every
// prefix that holds the whole id and method.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`), "2026-07-28", "tools/call", "double")
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), "2025-06-18", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t-1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`), "2026-07-28", "tasks/get", "t-1")
	f.Add([]byte(`{"jsonrpc":"2.0","id":null,"method":"resources/read","params":{"uri":"skill://v1/a/SKILL.md"}}`), "2025-11-25", "", "")
	f.Add([]byte(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`), "", "", "")
	f.Add([]byte(`{"jsonrpc":"1.0","id":1,"method":"ping"}`), "", "", "")
	f.Add([]byte(`{"jsonrpc":"2.0","id":{"x":1},"method":"ping","params":null}`), "1999-01-01", "", "")
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string) {
		header := http.Header{}
		for k, v := range map[string]string{"Mcp-Protocol-Version": version, "Mcp-Method": method, "Mcp-Name": name} {
			if v != "" {
				header.Set(k, v)
			}
		}
		req, rerr := decode(body, header)
		if rerr != nil {
			checkRefusal(t, req, rerr)
			return
		}
		// An initialize that names no version elsewhere proposes one, which
		// the SDK negotiates: it is not checked here.
		proposed, _ := req.meta[metaVersionKey].(string)
		negotiated := req != nil && req.Method == "initialize" && version == "" && proposed == ""
		if req == nil || req.JSONRPC != "2.0" || req.Method == "" || !negotiated && !slices.Contains(supportedVersions, req.version) {
			t.Fatalf("accepted %q as %+v", body, req)
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("an accepted request does not encode: %v", err)
		}
		back, rerr := decode(again, header)
		if rerr != nil {
			t.Fatalf("%s decoded, but its own encoding %s is refused: %+v", body, again, rerr.Data)
		}
		if back.Method != req.Method || back.name != req.name || back.version != req.version || !jsonEqual(back.ID, req.ID) && len(req.ID) > 0 || back.isCall() != req.isCall() {
			t.Fatalf("round trip changed the request: %+v then %+v", req, back)
		}
		// The SDK reads the body again, member names matched exactly: what
		// it serves must be what was checked and recorded.
		if whole := peek(body, header); whole.Method != req.Method || !jsonEqual(whole.ID, req.ID) && (len(whole.ID) > 0 || len(req.ID) > 0) {
			t.Fatalf("decode read method %q id %s, an exact reading %q id %s", req.Method, req.ID, whole.Method, whole.ID)
		}
		for end := range len(body) + 1 {
			p := peek(body[:end], header)
			if p.JSONRPC != "2.0" || p.truncated != string(body[:end]) {
				t.Fatalf("peek(%q) = %+v", body[:end], p)
			}
		}
	})
}

// checkRefusal holds for every request decode refuses.
func checkRefusal(t *testing.T, req *rpcRequest, rerr *rpcError) {
	t.Helper()
	if rerr.Code == "" || rerr.Message != messages[rerr.Code] || rerr.Hint == "" || rerr.Data["code"] != rerr.Code || rerr.Data["hint"] != rerr.Hint {
		t.Fatalf("refusal without its code, message and hint: %+v", rerr)
	}
	if rerr.Status < 400 || rerr.Status > 499 || rerr.RPC >= 0 {
		t.Fatalf("refusal with status %d and JSON-RPC code %d", rerr.Status, rerr.RPC)
	}
	w := httptest.NewRecorder()
	rerr.write(w, idOf(req))
	var sent struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64          `json:"code"`
			Message string         `json:"message"`
			Data    map[string]any `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &sent); err != nil || w.Code != rerr.Status {
		t.Fatalf("refusal sent as %d %q: %v", w.Code, w.Body, err)
	}
	if sent.JSONRPC != "2.0" || sent.Error.Code != rerr.RPC || sent.Error.Message != rerr.Message || sent.Error.Data["code"] != rerr.Code {
		t.Fatalf("refusal sent as %s", w.Body)
	}
	want := json.RawMessage("null")
	if id := idOf(req); len(id) > 0 {
		want = id
	}
	if !jsonEqual(sent.ID, want) {
		t.Fatalf("refusal answers id %s, the request's is %s", sent.ID, want)
	}
}
