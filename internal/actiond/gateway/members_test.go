package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// A body naming a JSON-RPC member in another case or twice is refused
// before anything serves it: the endpoint once read {"id":1,"Id":null} as
// a notification and handed it to the SDK ungated and unrecorded, while the
// SDK, matching names exactly, served it as a call (found by
// FuzzDecodeRequest).
func TestAmbiguousMembersAreRefused(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), at.CELTool("double", "event.data.n * 2.0", at.Object(map[string]any{"n": map[string]any{"type": "number"}}, "n")))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "members", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("double")}}.Input())
		header := http.Header{}
		header.Set("Content-Type", "application/json")
		header.Set("Accept", "application/json, text/event-stream")
		header.Set("Mcp-Protocol-Version", "2025-11-25")
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"Id":null,"method":"tools/call","params":{"name":"double","arguments":{"n":2}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"tools/list","params":{"name":"double","arguments":{"n":2}}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"double","arguments":{"n":2}}}`,
		} {
			reply := env.PostBody("members", env.Token(principal, "alice"), []byte(body), header)
			if reply.Status != http.StatusBadRequest || reply.DataCode() != "mcp_bad_request" || !strings.Contains(reply.String(), "member") {
				t.Fatalf("%s answered %s, want 400 mcp_bad_request naming the member", body, reply)
			}
		}
		if calls := requests(env, serverID, "tools/call"); len(calls) != 0 {
			t.Fatalf("a refused body was recorded as %d tools/call requests", len(calls))
		}
	})
}
