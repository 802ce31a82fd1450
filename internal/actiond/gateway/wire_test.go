package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/txtar"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// wireCase is one request of the wire transcript: a request built as
// at.Request builds it, or a raw body, with headers changed.
type wireCase struct {
	name    string
	request at.Request
	// raw, when set, is the body sent instead of the request's.
	raw string
	// header changes the request's headers; an empty value removes one.
	header map[string]string
	// server is the server it is sent to: "wire" unless set.
	server string
}

// The transcript's cases: every method the endpoint serves at each
// revision, well-formed and not, with the protocol's headers right and
// wrong. Each case's answer — status, content type, the headers a client
// acts on, and the body with IDs and times replaced — is kept in
// testdata/wire.txtar, so that a change to how a request is read or
// answered shows as a changed transcript.
func wireCases() []wireCase {
	const r26, r25, r0618 = at.Revision2026, "2025-11-25", "2025-06-18"
	call := func(name string, args map[string]any) map[string]any {
		return map[string]any{"name": name, "arguments": args}
	}
	double := call("double", map[string]any{"n": 21, "intent": "Check the wire."})
	tasks := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	skillURI := "skill://v1/fraud-review/SKILL.md"
	// rawCall is a tools/call of double whose _meta holds meta and the
	// protocol version.
	rawCall := func(meta string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + meta + `}}}`
	}
	callHeader := map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "double"}
	cases := []wireCase{
		{name: "discover", request: at.Request{Method: "server/discover"}},
		{name: "tools-list", request: at.Request{Method: "tools/list"}},
		{name: "tools-list-cursor", request: at.Request{Method: "tools/list", Params: map[string]any{"cursor": "abc"}}},
		{name: "tools-call", request: at.Request{Method: "tools/call", Params: double}},
		{name: "tools-call-string-id", request: at.Request{Method: "tools/call", ID: "call-7", Params: double}},
		{name: "tools-call-structured", request: at.Request{Method: "tools/call", Params: call("get_account", map[string]any{"account_id": "a1", "intent": "Check the wire."})}},
		{name: "tools-call-tool-fails", request: at.Request{Method: "tools/call", Params: call("get_account", map[string]any{"account_id": "boom", "intent": "Check the wire."})}},
		{name: "tools-call-bad-input", request: at.Request{Method: "tools/call", Params: call("double", map[string]any{"n": "x", "intent": "Check the wire."})}},
		{name: "tools-call-no-intent", request: at.Request{Method: "tools/call", Params: call("double", map[string]any{"n": 21})}},
		{name: "tools-call-unknown-tool", request: at.Request{Method: "tools/call", Params: call("nope", map[string]any{})}},
		{name: "tools-call-no-name", request: at.Request{Method: "tools/call", Params: map[string]any{"arguments": map[string]any{}}}},
		{name: "tools-call-name-not-string", request: at.Request{Method: "tools/call", Params: map[string]any{"name": 5}}, header: map[string]string{"Mcp-Name": "5"}},
		{name: "tools-call-arguments-not-object", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": "n=21"}}},
		{name: "tools-call-arguments-null", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": nil}}},
		{name: "tools-call-extra-params", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"], "unknown": true}}},
		{name: "tools-call-input-responses", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"], "inputResponses": map[string]any{"x": map[string]any{}}}}},
		{name: "tools-call-progress-token", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"], "_meta": map[string]any{"progressToken": 7}}}},
		{name: "tools-call-no-client-info", request: at.Request{Method: "tools/call", Params: double, NoClientInfo: true}},
		{name: "tools-call-bad-client-info", raw: rawCall(`"io.modelcontextprotocol/clientInfo":"x","io.modelcontextprotocol/clientCapabilities":{}`), header: callHeader},
		{name: "tools-call-client-info-number-name", raw: rawCall(`"io.modelcontextprotocol/clientInfo":{"name":5},"io.modelcontextprotocol/clientCapabilities":{}`), header: callHeader},
		{name: "tools-call-client-info-extra", raw: rawCall(`"io.modelcontextprotocol/clientInfo":{"name":"x","version":"1","vendor":"y"},"io.modelcontextprotocol/clientCapabilities":{}`), header: callHeader},
		{name: "tools-call-capabilities-roots", raw: rawCall(`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{}}}`), header: callHeader},
		{name: "tools-call-capabilities-bad-roots", raw: rawCall(`"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":"yes"}}`), header: callHeader},
		{name: "tools-call-capabilities-null", raw: rawCall(`"io.modelcontextprotocol/clientCapabilities":null`), header: callHeader},
		{name: "tools-call-extensions-not-object", raw: rawCall(`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":true}}`), header: callHeader},
		{name: "tools-call-meta-not-object", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","_meta":5}}`, header: callHeader},
		{name: "tools-call-request-state", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"], "requestState": "abc"}}},
		{name: "tools-call-request-state-number", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"], "requestState": 5}}},
		{name: "tools-call-input-responses-valid", request: at.Request{Method: "tools/call", Params: map[string]any{"name": "double", "arguments": double["arguments"],
			"inputResponses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}}}},
		{name: "tools-call-id-null", raw: `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-id-big", raw: `{"jsonrpc":"2.0","id":12345678901234567890,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-id-fraction", raw: `{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-id-object", raw: `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-duplicate-name", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-jsonrpc-1", raw: `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-trailing-garbage", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}} x`, header: callHeader},
		{name: "tools-call-unknown-envelope-member", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","extra":1,"params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, header: callHeader},
		{name: "tools-call-empty-body", raw: ` `, header: callHeader},
		{name: "tools-call-batch", raw: `[{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}]`, header: callHeader},
		{name: "tools-list-null-params", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, header: map[string]string{"Mcp-Method": "tools/list"}},
		{name: "tools-list-cursor-number", request: at.Request{Method: "tools/list", Params: map[string]any{"cursor": 5}}},
		{name: "prompts-get-arguments", request: at.Request{Method: "prompts/get", Params: map[string]any{"name": "fraud-review", "arguments": map[string]any{"a": "b"}}}},
		{name: "prompts-get-arguments-not-strings", request: at.Request{Method: "prompts/get", Params: map[string]any{"name": "fraud-review", "arguments": map[string]any{"a": 1}}}},
		{name: "resources-read-uri-number", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": 5}}, header: map[string]string{"Mcp-Name": "5"}},
		{name: "tasks-get-extra-params", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{"taskId": "00000000-0000-4000-8000-000000000000", "other": 1}}},
		{name: "skills-get-uri-number", request: at.Request{Method: "skills/get", Params: map[string]any{"uri": 5}}},
		{name: "skills-get-no-uri", request: at.Request{Method: "skills/get", Params: map[string]any{}}},
		{name: "tools-call-no-params", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": ""}},
		{name: "tools-call-params-array", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}`, header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": ""}},
		{name: "tools-call-no-capabilities", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "double"}},
		{name: "tools-call-capabilities-not-object", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"double","arguments":{"n":21,"intent":"Check the wire."},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}}}`,
			header: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "double"}},
		{name: "tools-call-accept-json-only", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Accept": "application/json"}},
		{name: "tools-call-no-accept", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Accept": ""}},
		{name: "tools-call-text-plain", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Content-Type": "text/plain"}},
		{name: "tools-call-json-charset", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{name: "tools-call-last-event-id", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Last-Event-ID": "5"}},
		{name: "tools-call-param-header", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Mcp-Param-N": "21"}},
		{name: "tools-call-method-header-mismatch", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Mcp-Method": "tools/list"}},
		{name: "tools-call-name-header-mismatch", request: at.Request{Method: "tools/call", Params: double}, header: map[string]string{"Mcp-Name": "other"}},
		{name: "unknown-method", request: at.Request{Method: "foo/bar"}},
		{name: "ping-2026", request: at.Request{Method: "ping"}},
		{name: "initialize-2026", request: at.Request{Method: "initialize", Params: map[string]any{"protocolVersion": r26, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}}},
		{name: "notification-2026", raw: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, header: map[string]string{"Mcp-Method": "notifications/initialized"}},
		{name: "tasks-start", request: at.Request{Method: "tools/call", Capabilities: tasks, Params: call("worker", map[string]any{"name": "wire", "intent": "Check the wire."})}},
		{name: "tasks-start-no-extension", request: at.Request{Method: "tools/call", Params: call("worker", map[string]any{"name": "wire", "intent": "Check the wire."})}},
		{name: "tasks-get-unknown", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}}},
		{name: "tasks-get-no-task-id", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{}}},
		{name: "tasks-get-task-id-number", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{"taskId": 5}}},
		{name: "tasks-get-no-extension", request: at.Request{Method: "tasks/get", Params: map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}}},
		{name: "tasks-update-unknown", request: at.Request{Method: "tasks/update", Capabilities: tasks, Params: map[string]any{"taskId": "00000000-0000-4000-8000-000000000000", "inputResponses": map[string]any{}}}},
		{name: "tasks-cancel-unknown", request: at.Request{Method: "tasks/cancel", Capabilities: tasks, Params: map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}}},
		{name: "resources-list", request: at.Request{Method: "resources/list"}},
		{name: "resources-templates-list", request: at.Request{Method: "resources/templates/list"}},
		{name: "resources-read-skill", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": skillURI}}},
		{name: "resources-read-skill-superseded", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": "skill://v9/fraud-review/SKILL.md"}}},
		{name: "resources-read-template", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": "twisp://accounts/a1"}}},
		{name: "resources-read-template-fails", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": "twisp://accounts/boom"}}},
		{name: "resources-read-unknown", request: at.Request{Method: "resources/read", Params: map[string]any{"uri": "twisp://nothing"}}},
		{name: "resources-read-no-uri", request: at.Request{Method: "resources/read", Params: map[string]any{}}},
		{name: "prompts-list", request: at.Request{Method: "prompts/list"}},
		{name: "prompts-get", request: at.Request{Method: "prompts/get", Params: map[string]any{"name": "fraud-review"}}},
		{name: "prompts-get-unknown", request: at.Request{Method: "prompts/get", Params: map[string]any{"name": "nope"}}},
		{name: "skills-list", request: at.Request{Method: "skills/list"}},
		{name: "skills-get", request: at.Request{Method: "skills/get", Params: map[string]any{"uri": skillURI}}},
		{name: "skills-get-unknown", request: at.Request{Method: "skills/get", Params: map[string]any{"uri": "skill://v1/nope/SKILL.md"}}},
		{name: "plain-resources-list", server: "plain", request: at.Request{Method: "resources/list"}},
		{name: "plain-prompts-list", server: "plain", request: at.Request{Method: "prompts/list"}},
		{name: "plain-skills-list", server: "plain", request: at.Request{Method: "skills/list"}},
		{name: "plain-tasks-start", server: "plain", request: at.Request{Method: "tools/call", Params: call("worker", map[string]any{"name": "wire", "intent": "Check the wire."})}},
	}
	for _, rev := range []string{r25, r0618} {
		old := func(name, method string, params map[string]any) wireCase {
			return wireCase{name: name + "-" + rev, request: at.Request{Method: method, Revision: rev, Params: params}}
		}
		cases = append(cases,
			old("initialize", "initialize", map[string]any{"protocolVersion": rev, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}),
			old("ping", "ping", nil),
			old("discover", "server/discover", nil),
			old("tools-list", "tools/list", nil),
			old("tools-call", "tools/call", double),
			old("tools-call-structured", "tools/call", call("get_account", map[string]any{"account_id": "a1", "intent": "Check the wire."})),
			old("tools-call-unknown-tool", "tools/call", call("nope", map[string]any{})),
			old("tools-call-no-name", "tools/call", map[string]any{"arguments": map[string]any{}}),
			old("tools-call-arguments-not-object", "tools/call", map[string]any{"name": "double", "arguments": "n=21"}),
			old("tools-call-name-not-string", "tools/call", map[string]any{"name": 5}),
			old("tools-call-meta-not-object", "tools/call", map[string]any{"name": "double", "_meta": 5}),
			old("prompts-get-arguments-not-strings", "prompts/get", map[string]any{"name": "fraud-review", "arguments": map[string]any{"a": 1}}),
			old("resources-read-uri-number", "resources/read", map[string]any{"uri": 5}),
			old("tasks-cancel", "tasks/cancel", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}),
			old("resources-list", "resources/list", nil),
			old("resources-templates-list", "resources/templates/list", nil),
			old("prompts-list", "prompts/list", nil),
			old("skills-get", "skills/get", map[string]any{"uri": skillURI}),
			wireCase{name: "tools-call-no-params-" + rev, raw: `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, request: at.Request{Revision: rev}},
			wireCase{name: "tools-list-no-params-" + rev, raw: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, request: at.Request{Revision: rev}},
			wireCase{name: "tools-call-capabilities-in-meta-" + rev, request: at.Request{Method: "tools/call", Revision: rev,
				Params: map[string]any{"name": "double", "arguments": double["arguments"], "_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}}}},
			old("tasks-start", "tools/call", call("worker", map[string]any{"name": "wire", "intent": "Check the wire."})),
			old("tasks-get", "tasks/get", map[string]any{"taskId": "00000000-0000-4000-8000-000000000000"}),
			old("resources-read-skill", "resources/read", map[string]any{"uri": skillURI}),
			old("prompts-get", "prompts/get", map[string]any{"name": "fraud-review"}),
			old("skills-list", "skills/list", nil),
			wireCase{name: "notification-" + rev, raw: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, request: at.Request{Revision: rev}},
		)
	}
	cases = append(cases, wireCase{name: "tools-list-no-version", raw: `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, header: map[string]string{"Mcp-Protocol-Version": ""}})
	return cases
}

// The transcript's task cases, which read the task tasks-start created:
// its model holds every answer, so that the task is still working.
func wireTaskCases(taskID string) []wireCase {
	tasks := map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}
	return []wireCase{
		{name: "tasks-get-working", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{"taskId": taskID}}},
		{name: "tasks-update", request: at.Request{Method: "tasks/update", Capabilities: tasks, Params: map[string]any{"taskId": taskID, "inputResponses": map[string]any{}}}},
		{name: "tasks-get-task-of-another-session", request: at.Request{Method: "tasks/get", Capabilities: tasks, Params: map[string]any{"taskId": taskID}}, header: map[string]string{"X-Wire-Subject": "mallory"}},
		{name: "tasks-cancel", request: at.Request{Method: "tasks/cancel", Capabilities: tasks, Params: map[string]any{"taskId": taskID}}},
	}
}

// TestWireTranscript sends every case of the transcript and compares each
// answer with testdata/wire.txtar (UPDATE_WIRE=1 rewrites it): the status,
// the content type and the headers a client acts on, and the body, as JSON
// (key order aside) with IDs and times replaced.
func TestWireTranscript(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	model := at.FakeModel(t, modelKey, func(x modeltest.Exchange) modeltest.Reply { return modeltest.Reply{Text: "done", Release: release} })
	env := at.New(t, store.SQLite, at.Options{Models: at.Providers(model, modelKey)})
	env.PutPrincipal(principal, at.Everything())
	env.CreateAction(at.NewID(), at.CELTool("double", `event.data.n * 2`, at.Object(map[string]any{"n": at.Integer()}, "n")))
	env.CreateAction(at.NewID(), accountTool(selectOnly))
	env.CreateAction(at.NewID(), at.StarlarkTool("close_account", `def run(event): return 1`, nil, nil))
	env.CreateAction(at.NewID(), fraudReview("Reviewing an account for fraud."))
	env.CreateAction(at.NewID(), at.AgentSpec{Name: "worker", Model: "worker", InputSchema: at.Object(map[string]any{"name": at.String()})}.Input())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "wire", Instructions: "Answers the wire transcript.", Policies: at.Everything(),
		Tools:     []map[string]any{at.Ref("double"), at.Ref("get_account"), at.Ref("worker")},
		Skills:    []map[string]any{at.Ref("fraud-review")},
		Resources: []map[string]any{at.Template("twisp://accounts/{account_id}", "account", "An account.", "get_account")}}.Input())
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "plain", Policies: at.Everything(), Tools: []map[string]any{at.Ref("double"), at.Ref("worker")}}.Input())
	tokens := map[string]string{"": env.Token(principal, "wire"), "mallory": env.Token(principal, "mallory")}

	var got []txtar.File
	send := func(c wireCase) map[string]any {
		body, header := c.request.Body()
		if c.raw != "" {
			body = []byte(c.raw)
		}
		for k, v := range c.header {
			if v == "" {
				header.Del(k)
			} else {
				header.Set(k, v)
			}
		}
		token := tokens[header.Get("X-Wire-Subject")]
		header.Del("X-Wire-Subject")
		server := c.server
		if server == "" {
			server = "wire"
		}
		reply := env.PostBody(server, token, body, header)
		got = append(got, txtar.File{Name: c.name, Data: wireAnswer(reply)})
		return reply.RPC
	}
	for _, c := range wireCases() {
		reply := send(c)
		if c.name == "tasks-start" {
			taskID, _ := at.Dig(reply, "result", "taskId").(string)
			if taskID == "" {
				t.Fatalf("tasks-start answered no task: %v", reply)
			}
			for _, tc := range wireTaskCases(taskID) {
				send(tc)
			}
		}
	}
	compareWire(t, got)
}

// wireAnswer is one answer as the transcript keeps it.
func wireAnswer(reply at.Reply) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "status %d\n", reply.Status)
	for _, name := range []string{"Content-Type", "Cache-Control", "Allow", "Retry-After", "Www-Authenticate"} {
		if v := reply.Header.Get(name); v != "" {
			fmt.Fprintf(&b, "%s: %s\n", name, v)
		}
	}
	var body any
	if json.Unmarshal(reply.Body, &body) == nil && len(bytes.TrimSpace(reply.Body)) > 0 {
		indented, _ := json.MarshalIndent(body, "", "  ")
		b.Write(indented)
	} else {
		b.Write(reply.Body)
	}
	text := volatile.ReplaceAllStringFunc(b.String(), func(s string) string {
		if uuidPattern.MatchString(s) {
			return "<uuid>"
		}
		return "<time>"
	})
	return []byte(strings.TrimRight(text, "\n") + "\n")
}

var (
	uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	volatile    = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
)

// compareWire compares the answers with the transcript, or writes it.
func compareWire(t *testing.T, got []txtar.File) {
	t.Helper()
	path := filepath.Join("testdata", "wire.txtar")
	if os.Getenv("UPDATE_WIRE") == "1" {
		archive := &txtar.Archive{Comment: []byte("The endpoint's answers to TestWireTranscript's requests: status, content type,\n" +
			"the headers a client acts on, and the body with IDs and times replaced.\n" +
			"UPDATE_WIRE=1 go test -run TestWireTranscript ./internal/actiond/gateway/ rewrites it.\n")}
		archive.Files = got
		if err := os.WriteFile(path, txtar.Format(archive), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	archive, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_WIRE=1 writes it)", err)
	}
	want := map[string][]byte{}
	var names []string
	for _, f := range archive.Files {
		want[f.Name] = f.Data
		names = append(names, f.Name)
	}
	for _, f := range got {
		expected, ok := want[f.Name]
		if !ok {
			t.Errorf("%s: not in the transcript (UPDATE_WIRE=1 adds it):\n%s", f.Name, f.Data)
			continue
		}
		if !sameAnswer(expected, f.Data) {
			t.Errorf("%s: the answer changed\n--- transcript\n%s--- now\n%s", f.Name, expected, f.Data)
		}
	}
	for _, name := range names {
		if !slices.ContainsFunc(got, func(f txtar.File) bool { return f.Name == name }) {
			t.Errorf("%s: in the transcript, but no longer sent", name)
		}
	}
}

// sameAnswer compares two transcript entries: the header lines as text,
// the body as JSON when it is JSON.
func sameAnswer(a, b []byte) bool {
	headA, bodyA := splitAnswer(a)
	headB, bodyB := splitAnswer(b)
	if headA != headB {
		return false
	}
	var x, y any
	if json.Unmarshal([]byte(bodyA), &x) == nil && json.Unmarshal([]byte(bodyB), &y) == nil {
		return at.JSONEqual(x, y)
	}
	return bodyA == bodyB
}

func splitAnswer(entry []byte) (head, body string) {
	lines := strings.SplitAfter(string(entry), "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "status ") || regexp.MustCompile(`^[A-Z][A-Za-z-]*: `).MatchString(lines[i])) {
		i++
	}
	return strings.Join(lines[:i], ""), strings.Join(lines[i:], "")
}
