package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// ACT-579, ACT-580, ACT-581, ACT-582, ACT-584, ACT-585, ACT-586, ACT-587, ACT-588, ACT-589, ACT-590, ACT-591, ACT-592, ACT-594, ACT-595, ACT-596, ACT-597: the local environment's default
// server: the native graphql and cel and the audit tool, policies allowing
// everything (so the principal's own bound each request), LIVE, intent
// required, a session per principal and subject, and audit reading the
// session's own record back, oldest first.
func TestDefaultServer(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		for _, rev := range at.Revisions {
			t.Run(rev, func(t *testing.T) {
				env := at.New(t, d, at.Options{})
				alice := env.Connect("default", env.Token(server.LocalPrincipal, "alice"), rev)
				list, err := alice.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range list.Tools {
					names = append(names, tool.Name)
					schema := at.AsJSON(tool.InputSchema)
					if !strings.Contains(schema, `"intent"`) || !slices.Contains(at.Strings(normalize(tool.InputSchema).(map[string]any)["required"]), "intent") {
						t.Errorf("%s does not require intent: %s", tool.Name, schema)
					}
					if tool.Name == "audit" {
						if !tool.Annotations.ReadOnlyHint {
							t.Errorf("audit is not read-only: %s", at.AsJSON(tool.Annotations))
						}
						if strings.Contains(schema, "session_id") || strings.Contains(schema, `"server"`) {
							t.Errorf("audit lists its fixed input: %s", schema)
						}
					}
				}
				if !slices.Equal(names, []string{"graphql", "cel", "program", "invoke", "get_task", "cancel_task", "audit"}) {
					t.Errorf("default lists %v", names)
				}

				// Intent is required.
				res := at.CallTool(t, alice, "cel", map[string]any{"expression": "1 + 1"})
				if !res.IsError || !strings.Contains(at.Text(res), "intent") {
					t.Errorf("a call without intent: %s", at.Text(res))
				}
				// LIVE: the write commits, with no preview marker.
				res = at.CallTool(t, alice, "graphql", map[string]any{"intent": "Record a note.",
					"query": `mutation { kv { put(namespace: "notes", key: "a", value: {text: "hi"}) { key } } }`})
				if res.IsError || res.Meta["com.twisp/preview"] != nil {
					t.Fatalf("graphql write: %s %s", at.Text(res), at.AsJSON(res.Meta))
				}
				if got := env.KV("notes", "a"); !jsonEqualValues(got, map[string]any{"text": "hi"}) {
					t.Errorf("the default server's write reads %s", at.AsJSON(got))
				}
				res = at.CallTool(t, alice, "cel", map[string]any{"intent": "Fail on purpose.", "expression": "1 / 0"})
				if !res.IsError {
					t.Errorf("1 / 0: %s", at.Text(res))
				}
				// The principal's own policies bound each request.
				env.PutPrincipal("reader", []map[string]any{at.Allow([]string{"SELECT", "INVOKE"}, "*")})
				reader := env.Connect("default", env.Token("reader", "rita"), rev)
				res = at.CallTool(t, reader, "graphql", map[string]any{"intent": "Try to write.",
					"query": `mutation { kv { put(namespace: "notes", key: "b", value: {text: "no"}) { key } } }`})
				if !res.IsError || !strings.Contains(at.Text(res), "the principal's policies") {
					t.Errorf("a reader's write through default: %s", at.Text(res))
				}

				// audit: its own session, oldest first.
				res = at.CallTool(t, alice, "audit", map[string]any{"intent": "Review what I did.", "session_id": "someone-else", "server": "other"})
				if res.IsError {
					t.Fatalf("audit: %s", at.Text(res))
				}
				out := normalize(res.StructuredContent).(map[string]any)
				if out["server"] != "default" || out["session_id"] != at.SessionIDFor(server.LocalPrincipal, "alice") || out["complete"] != true {
					t.Errorf("audit answered %s", at.AsJSON(out))
				}
				steps := out["steps"].([]any)
				// A GraphQL step names the operation's head: its first 80 characters.
				wantDid := []string{"server/discover", "tools/list", "cel", "graphql: mutation { kv { put(namespace: \"notes\", key: \"a\", value: {text: \"hi\"}) { key } }", "cel"}
				if rev != at.Revision2026 {
					wantDid[0] = "initialize"
				}
				if len(steps) != len(wantDid) {
					t.Fatalf("audit steps %s", at.AsJSON(steps))
				}
				wantStatus := []string{"SUCCEEDED", "SUCCEEDED", "TOOL_ERROR", "SUCCEEDED", "TOOL_ERROR"}
				wantIntent := []any{nil, nil, nil, "Record a note.", "Fail on purpose."}
				for i, s := range steps {
					step := s.(map[string]any)
					if step["did"] != wantDid[i] || step["status"] != wantStatus[i] || step["intent"] != wantIntent[i] || step["at"] == nil {
						t.Errorf("step %d: %s, want did %q status %s intent %v", i, at.AsJSON(step), wantDid[i], wantStatus[i], wantIntent[i])
					}
					if e := env.Execution(step["execution_id"].(string)); e == nil {
						t.Errorf("step %d's execution_id does not resolve", i)
					}
					if (wantStatus[i] == "TOOL_ERROR") != (step["error"] != nil) {
						t.Errorf("step %d error %v", i, step["error"])
					}
				}
				// ACT-593: complete is false when there were more steps.
				res = at.CallTool(t, alice, "audit", map[string]any{"intent": "Only the last two.", "limit": 2})
				out = normalize(res.StructuredContent).(map[string]any)
				if out["complete"] != false || len(out["steps"].([]any)) != 2 {
					t.Errorf("audit with limit 2: %s", at.AsJSON(out))
				}
				// ACT-587: each subject has a session of its own.
				bob := env.Connect("default", env.Token(server.LocalPrincipal, "bob"), rev)
				res = at.CallTool(t, bob, "audit", map[string]any{"intent": "Review."})
				out = normalize(res.StructuredContent).(map[string]any)
				if out["session_id"] != at.SessionIDFor(server.LocalPrincipal, "bob") || len(out["steps"].([]any)) != 1 {
					t.Errorf("bob's audit: %s", at.AsJSON(out))
				}
				// ACT-580: the default server is an ordinary action.
				env.UpdateAction(server.DefaultServerID, map[string]any{"description": "changed"})
				res = at.CallTool(t, alice, "cel", map[string]any{"intent": "After the change.", "expression": "'ok'"})
				if _, version := meta(res.Meta); version != "2" {
					t.Errorf("after updateAction the default server answers at version %q", version)
				}
			})
		}
	})
}

func meta(m mcp.Meta) (name, version string) {
	name, _ = at.Dig(map[string]any(m), "io.modelcontextprotocol/serverInfo", "name").(string)
	version, _ = at.Dig(map[string]any(m), "io.modelcontextprotocol/serverInfo", "version").(string)
	return name, version
}
