package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/clock"
)

// nestedSource calls the tool one n times: a tool that makes n calls
// beneath it, as a program does.
const nestedSource = `
def run(event):
    for i in range(int(event["data"]["n"])):
        tools.one({})
    return event["data"]["n"]
`

func defineLimited(env *at.Env, name string, limit int) string {
	env.CreateAction(at.NewID(), at.CELTool("one", `1`, nil))
	env.CreateAction(at.NewID(), at.StarlarkTool("nested", nestedSource, at.Object(map[string]any{"n": at.Integer()}, "n"), []map[string]any{at.Ref("one")}))
	defineGate(env)
	id := at.NewID()
	env.CreateAction(id, at.ServerSpec{Name: name, Intent: "NONE", CallsPerMinute: limit, Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("one"), at.Ref("nested"), at.Ref("gate")}}.Input())
	return id
}

func call(name string, args map[string]any, rev string) at.Request {
	return at.Request{Method: "tools/call", Revision: rev, Params: map[string]any{"name": name, "arguments": args}}
}

// ACT-509, ACT-511, ACT-512, ACT-513, ACT-514, ACT-517, ACT-567, ACT-576: callsPerMinute bounds each session: each
// admitted request counts one, a request's nested calls count once its
// outcome is recorded, and a request beyond the limit gets 429 with
// Retry-After and mcp_rate_limited naming the limit; capacity returns as
// admitted requests age past a minute.
func TestRateLimitCountsCalls(t *testing.T) {
	eachFake(t, func(t *testing.T, env *at.Env, rev string, fake *clock.Fake) {
		serverID := defineLimited(env, "limited", 6)
		alice, bob := env.Token(principal, "alice"), env.Token(principal, "bob")
		// A tool making 4 calls beneath it: 5 calls.
		if reply := env.Post("limited", alice, call("nested", map[string]any{"n": 4}, rev)); reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("nested: %s", reply)
		}
		in := env.Session(serverID, at.SessionIDFor(principal, "alice"))["inputs"].([]any)
		if in[0].(map[string]any)["calls"] != 5.0 {
			t.Errorf("the nested request counted %v calls, want 5", in[0].(map[string]any)["calls"])
		}
		if reply := env.Post("limited", alice, call("one", nil, rev)); reply.Status != 200 {
			t.Fatalf("the sixth call: %s", reply)
		}
		reply := env.Post("limited", alice, call("one", nil, rev))
		if reply.Status != 429 || reply.DataCode() != "mcp_rate_limited" || at.Dig(reply.RPC, "error", "data", "callsPerMinute") != 6.0 || reply.ErrorCode() != -32602 {
			t.Fatalf("past the limit: %s", reply)
		}
		// ACT-567, ACT-570: a fixed message for the code, and a hint.
		if at.Dig(reply.RPC, "error", "message") != "This session made too many calls in the last minute." || at.Dig(reply.RPC, "error", "data", "hint") == nil {
			t.Errorf("mcp_rate_limited message or hint: %s", reply)
		}
		if got := reply.Header.Get("Retry-After"); got != "60" {
			t.Errorf("Retry-After %q, want 60 (all of the minute's calls came now)", got)
		}
		if reply := env.Post("limited", bob, call("one", nil, rev)); reply.Status != 200 {
			t.Errorf("another session is limited by alice's: %s", reply)
		}
		// The oldest request ages out of the window.
		fake.Advance(30 * time.Second)
		if reply := env.Post("limited", alice, call("one", nil, rev)); reply.Status != 429 || reply.Header.Get("Retry-After") != "30" {
			t.Errorf("half a minute later: %s Retry-After %q", reply, reply.Header.Get("Retry-After"))
		}
		fake.Advance(31 * time.Second)
		if reply := env.Post("limited", alice, call("one", nil, rev)); reply.Status != 200 {
			t.Errorf("a minute later: %s", reply)
		}
	})
}

// ACT-510: a running request counts as one while it runs.
func TestRateLimitCountsRunningRequests(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		defineLimited(env, "one_at_a_time", 1)
		token := env.Token(principal, "alice")
		key := gateKey(t)
		done := make(chan at.Reply, 1)
		go func() {
			body, header := call("gate", map[string]any{"key": key}, rev).Body()
			reply, err := at.PostBody(context.Background(), at.HTTPClient(""), env.Endpoint("one_at_a_time"), token, body, header)
			if err != nil {
				t.Error(err)
			}
			done <- reply
		}()
		serverID := at.Dig(env.MustGraphQL(`{ actionByName(name: "one_at_a_time") { id } }`, nil), "actionByName", "id").(string)
		waitFor(t, "the gate call to run", func() bool { return len(requests(env, serverID, "tools/call")) == 1 })
		if reply := env.Post("one_at_a_time", token, call("one", nil, rev)); reply.Status != 429 {
			t.Errorf("a second request while the first runs: %s", reply)
		}
		openGate(env, key)
		if reply := <-done; reply.Status != 200 {
			t.Errorf("the gate call: %s", reply)
		}
	})
}

// ACT-518, ACT-519, ACT-520, ACT-521, ACT-522, ACT-523, ACT-524, ACT-525: refusals after the token check are recorded FAILED with the
// request and the reason, outside any session, running nothing; only the
// first of a principal and subject at a server each minute, the rest
// counted into the next recorded one's unrecorded_refusals and window.
func TestRefusalsRecordedAndThrottled(t *testing.T) {
	eachFake(t, func(t *testing.T, env *at.Env, rev string, fake *clock.Fake) {
		env.CreateAction(at.NewID(), at.CELTool("one", `1`, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "refusing", Intent: "NONE", CallsPerMinute: 1, Policies: at.Everything(), Tools: []map[string]any{at.Ref("one")}}.Input())
		env.PutPrincipal("no-invoke", []map[string]any{at.Allow([]string{"SELECT"}, "*")})
		opened := fake.Now()

		// One refusal of each kind, each by its own user.
		big := strings.Repeat("x", 4<<20+10)
		kinds := []struct {
			user, who, code string
			status          int
			req             at.Request
		}{
			{"u-forbidden", "no-invoke", "mcp_forbidden", 403, at.Request{Method: "tools/list", Revision: rev}},
			{"u-method", principal, "mcp_method_not_found", 404, at.Request{Method: "prompts/list", Revision: rev}},
			{"u-task", principal, "mcp_task_required", 400, at.Request{Method: "tasks/get", Revision: rev, Params: map[string]any{"taskId": "t1"}}},
			{"u-large", principal, "mcp_request_too_large", 413, call("one", map[string]any{"pad": big}, rev)},
		}
		for _, k := range kinds {
			reply := env.Post("refusing", env.Token(k.who, k.user), k.req)
			if reply.Status != k.status || reply.DataCode() != k.code {
				t.Errorf("%s: %s, want %d %s", k.code, reply, k.status, k.code)
			}
		}
		// The rate limit and a closed session.
		limited := env.Token(principal, "u-limited")
		env.Post("refusing", limited, call("one", nil, rev))
		if reply := env.Post("refusing", limited, call("one", nil, rev)); reply.Status != 429 {
			t.Errorf("rate limit: %s", reply)
		}
		closed := env.Token(principal, "u-closed")
		env.Post("refusing", closed, call("one", nil, rev))
		env.CloseSession(serverID, at.SessionIDFor(principal, "u-closed"))
		if reply := env.Post("refusing", closed, call("one", nil, rev)); at.Dig(reply.Result(), "_meta", "com.twisp/error", "code") != "session_closed" {
			t.Errorf("closed session: %s", reply)
		}

		byUser := map[string]map[string]any{}
		for _, r := range env.Executions(serverID) {
			if r["role"] == "refusal" {
				byUser[r["subject"].(string)] = r
			}
		}
		for user, code := range map[string]string{"u-forbidden": "mcp_forbidden", "u-method": "mcp_method_not_found", "u-task": "mcp_task_required",
			"u-large": "mcp_request_too_large", "u-limited": "mcp_rate_limited", "u-closed": "session_closed"} {
			r := byUser[user]
			if r == nil {
				t.Errorf("%s's refusal (%s) was not recorded", user, code)
				continue
			}
			if r["status"] != "FAILED" || r["sessionId"] != nil || at.Dig(r, "error", "code") != code || at.Dig(r, "invocation", "error", "code") != code ||
				len(r["calls"].([]any)) != 0 || r["eventType"] != "mcp.request" || at.Dig(r, "mcpRequest", "method") == nil {
				t.Errorf("%s's refusal: %s", user, asJSON(r))
			}
		}
		for _, s := range []string{"u-forbidden", "u-method", "u-task", "u-large"} {
			if session := env.Session(serverID, at.SessionIDFor(principal, s)); session != nil {
				t.Errorf("a refusal created session %s", asJSON(session))
			}
		}

		// Throttling: five refusals of one user in a minute record one;
		// another user sharing the principal is recorded too.
		for range 5 {
			env.Post("refusing", env.Token(principal, "flood"), at.Request{Method: "foo/bar", Revision: rev})
		}
		env.Post("refusing", env.Token(principal, "other"), at.Request{Method: "foo/bar", Revision: rev})
		count := func(user string) []map[string]any {
			var out []map[string]any
			for _, r := range env.Executions(serverID) {
				if r["role"] == "refusal" && r["subject"] == user {
					out = append(out, r)
				}
			}
			return out
		}
		if n := len(count("flood")); n != 1 {
			t.Errorf("5 refusals in a minute recorded %d", n)
		}
		if n := len(count("other")); n != 1 {
			t.Errorf("another user's refusal recorded %d times, want 1", n)
		}
		if details := at.Dig(count("flood")[0], "invocation", "error", "details"); details != nil && len(details.(map[string]any)) != 0 {
			t.Errorf("the first refusal carries details %s", asJSON(details))
		}
		fake.Advance(61 * time.Second)
		env.Post("refusing", env.Token(principal, "flood"), at.Request{Method: "foo/bar", Revision: rev})
		flood := count("flood")
		if len(flood) != 2 {
			t.Fatalf("the next minute's refusal: %d recorded", len(flood))
		}
		details := at.Dig(flood[1], "invocation", "error", "details").(map[string]any)
		if details["unrecorded_refusals"] != 4.0 || details["window"] != opened.UTC().Format(time.RFC3339) {
			t.Errorf("details %s, want unrecorded_refusals 4 and window %s", asJSON(details), opened.UTC().Format(time.RFC3339))
		}
	})
}

// ACT-086, ACT-570, ACT-574: the Tasks extension's methods need the
// extension: without it 400 -32021 naming the method and the capability;
// with it an unknown task is -32602 mcp_task_not_found with one message.
func TestTaskMethods(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "tasks", Intent: "NONE", Policies: at.Everything()}.Input())
		for i, method := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
			reply := env.Post("tasks", env.Token(principal, "u"+method), at.Request{Method: method, Revision: rev, Params: map[string]any{"taskId": "t-1"}})
			required := at.Dig(reply.RPC, "error", "data", "requiredCapabilities", "extensions", "io.modelcontextprotocol/tasks")
			if reply.Status != 400 || reply.ErrorCode() != -32021 || at.Dig(reply.RPC, "error", "data", "method") != method || required == nil {
				t.Errorf("%s without the extension: %s", method, reply)
			}
			if rev != at.Revision2026 {
				continue // older revisions declare no extension per request
			}
			messages := map[string]bool{}
			for _, id := range []string{"t-1", "another-task"} {
				reply := env.Post("tasks", env.Token(principal, "alice"), at.Request{Method: method, ID: i, Revision: rev, Params: map[string]any{"taskId": id},
					Capabilities: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}})
				if reply.ErrorCode() != -32602 || reply.DataCode() != "mcp_task_not_found" {
					t.Errorf("%s %s with the extension: %s", method, id, reply)
					continue
				}
				messages[at.Dig(reply.RPC, "error", "message").(string)] = true
			}
			if len(messages) != 1 {
				t.Errorf("%s: mcp_task_not_found messages differ by task: %v", method, messages)
			}
		}
	})
}
