package gateway_test

import (
	"context"
	"database/sql"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// ACT-002, ACT-096, ACT-097, ACT-098, ACT-099, ACT-100, ACT-101, ACT-103, ACT-113, ACT-118, ACT-121, ACT-122, ACT-123, ACT-483, ACT-486, ACT-493, ACT-494, ACT-496, ACT-498, ACT-499, ACT-500, ACT-599: each admitted
// request is one execution of the server whose input is the request, whose
// caller, subject and client come from the token, readable as soon as its
// answer arrives, with one REQUEST input of its session CLAIMED at admission
// and CONSUMED with its call count.
func TestRecordsEveryRequest(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		env.CreateAction(at.NewID(), at.StarlarkTool("echo", echoSource, nil, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "recorded", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("echo")}}.Input())
		s := env.Connect("recorded", env.Token(principal, "alice"), rev)
		afterConnect := len(env.Executions(serverID))
		if afterConnect != 1 {
			t.Fatalf("connecting recorded %d requests, want 1 (server/discover or initialize)", afterConnect)
		}
		listTools(t, s)
		// ACT-118: the answer arrives only once its record committed.
		if got := last(t, env.Executions(serverID)); got["status"] != "SUCCEEDED" || at.Dig(got, "mcpRequest", "method") != "tools/list" {
			t.Fatalf("right after tools/list answered, its record reads %v %v", got["status"], at.Dig(got, "mcpRequest", "method"))
		}
		// ACT-121, ACT-122, ACT-123: _meta and clientInfo cannot name someone else.
		spoof := map[string]any{"principal": "evil", "subject": "evil", "client": "evil", "io.modelcontextprotocol/clientInfo": map[string]any{"name": "evil"}}
		res, err := s.CallTool(ctx(t), &mcp.CallToolParams{Meta: spoof, Name: "echo", Arguments: map[string]any{"a": 1}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %v %v", err, res)
		}
		if got := last(t, env.Executions(serverID)); got["status"] != "SUCCEEDED" || !jsonEqual(at.Dig(got, "output", "structuredContent"), res.StructuredContent) {
			t.Fatalf("right after tools/call answered, its record reads %s", asJSON(got))
		}
		if _, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: "missing"}); err == nil {
			t.Fatal("a call of an undeclared tool succeeded")
		}

		records := env.Executions(serverID)
		if len(records) != 4 {
			t.Fatalf("%d requests recorded, want 4", len(records))
		}
		sessionID := at.SessionIDFor(principal, "alice")
		session := env.Session(serverID, sessionID)
		inputs := session["inputs"].([]any)
		if len(inputs) != 4 {
			t.Fatalf("session has %d inputs, want 4: %s", len(inputs), asJSON(inputs))
		}
		wantMethods := []string{"server/discover", "tools/list", "tools/call", "tools/call"}
		if rev != at.Revision2026 {
			wantMethods[0] = "initialize"
		}
		for i, r := range records {
			if r["eventType"] != "mcp.request" || r["role"] != "request" || r["caller"] != principal || r["subject"] != "alice" || r["client"] != "client-alice" {
				t.Errorf("request %d: %v %v caller %v subject %v client %v", i, r["eventType"], r["role"], r["caller"], r["subject"], r["client"])
			}
			request := r["mcpRequest"].(map[string]any)
			if request["method"] != wantMethods[i] || request["principal"] != principal || request["subject"] != "alice" ||
				request["client"] != "client-alice" || request["protocolVersion"] != rev {
				t.Errorf("request %d mcpRequest %s", i, asJSON(request))
			}
			if !jsonEqual(r["input"].(map[string]any)["method"], wantMethods[i]) || request["id"] == nil {
				t.Errorf("request %d input %s", i, asJSON(r["input"]))
			}
			if r["sessionId"] != sessionID {
				t.Errorf("request %d in session %v, want %s", i, r["sessionId"], sessionID)
			}
			input := inputs[i].(map[string]any)
			wantCalls := 0.0
			if i == 2 {
				wantCalls = 1
			}
			if input["type"] != "REQUEST" || input["executionId"] != r["id"] || input["state"] != "CONSUMED" || input["calls"] != wantCalls || input["seq"] != float64(i+1) {
				t.Errorf("session input %d: %s (request %v)", i, asJSON(input), r["id"])
			}
		}
		call := records[2]
		if !strings.Contains(asJSON(call["input"]), `"evil"`) || call["caller"] != principal {
			t.Errorf("the spoofing request: input %s caller %v", asJSON(call["input"]), call["caller"])
		}
		if got := at.Dig(call, "input", "params", "arguments"); !jsonEqual(got, map[string]any{"a": 1}) {
			t.Errorf("recorded arguments %s", asJSON(got))
		}
		unknown := records[3]
		if unknown["status"] != "FAILED" || at.Dig(unknown, "error", "code") != "tool_not_declared" || at.Dig(unknown, "output", "error", "code") != -32602.0 {
			t.Errorf("undeclared tool recorded %v error %s output %s", unknown["status"], asJSON(unknown["error"]), asJSON(unknown["output"]))
		}
		// ACT-499: the session's executions are its requests.
		inSession := env.ExecutionsWhere(map[string]any{"actionId": serverID, "sessionId": sessionID})
		if len(inSession) != 4 {
			t.Errorf("executions(where: {actionId, sessionId}) lists %d, want 4", len(inSession))
		}
		// ACT-486, ACT-488: another user gets a session of their own.
		env.Connect("recorded", env.Token(principal, "bob"), rev)
		if other := last(t, env.Executions(serverID)); other["sessionId"] != at.SessionIDFor(principal, "bob") {
			t.Errorf("bob's request in session %v", other["sessionId"])
		}
	})
}

// ACT-108: a request whose client goes away before its result is recorded
// CANCELLED, and what it ran is kept.
func TestRecordsCancelledRequest(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		defineGate(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "cancelled", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("gate")}}.Input())
		body, header := at.Request{Method: "tools/call", Revision: rev, Params: map[string]any{"name": "gate", "arguments": map[string]any{"key": gateKey(t)}}}.Body()
		c, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := at.PostBody(c, at.HTTPClient(""), env.Endpoint("cancelled"), env.Token(principal, "alice"), body, header)
			done <- err
		}()
		waitFor(t, "the request to run", func() bool { return len(requests(env, serverID, "tools/call")) == 1 })
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the cancelled request got an answer")
		}
		var request map[string]any
		waitFor(t, "the request to be recorded CANCELLED", func() bool {
			request = last(t, requests(env, serverID, "tools/call"))
			return request["status"] != "RUNNING"
		})
		if request["status"] != "CANCELLED" || request["endedAt"] == nil {
			t.Fatalf("a cancelled request recorded %v", request["status"])
		}
		input := env.Session(serverID, at.SessionIDFor(principal, "alice"))["inputs"].([]any)[0].(map[string]any)
		if input["state"] != "CONSUMED" {
			t.Errorf("the cancelled request's input is %v", input["state"])
		}
	})
}

// ACT-040, ACT-104, ACT-568, ACT-577: a request that passes the server's
// response timeout fails with -32603 mcp_request_deadline naming the
// timeout in seconds, and is recorded FAILED.
func TestRequestDeadline(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		defineGate(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "hasty", Intent: "NONE", ResponseTimeout: "1s", Policies: at.Everything(),
			Tools: []map[string]any{at.Ref("gate")}}.Input())
		s := env.Connect("hasty", env.Token(principal, "alice"), rev)
		began := time.Now()
		_, err := s.CallTool(ctx(t), &mcp.CallToolParams{Name: "gate", Arguments: map[string]any{"key": gateKey(t)}})
		if took := time.Since(began); took > 3*time.Second {
			t.Errorf("the deadline answered after %v", took)
		}
		werr := rpcError(t, err)
		data := errorData(t, werr)
		if werr.Code != -32603 || data["code"] != "mcp_request_deadline" || data["responseTimeout"] != 1.0 || data["hint"] == nil {
			t.Fatalf("deadline: %d %s %s", werr.Code, werr.Message, werr.Data)
		}
		request := last(t, requests(env, serverID, "tools/call"))
		if request["status"] != "FAILED" || at.Dig(request, "error", "code") != "mcp_request_deadline" {
			t.Errorf("deadline recorded %v %s", request["status"], asJSON(request["error"]))
		}
		if !strings.Contains(asJSON(request["invocation"]), "mcp_request_deadline") {
			t.Errorf("invocation.error lacks the cause: %s", asJSON(request["invocation"]))
		}

		// ACT-042: a tool is also bounded by its own response timeout,
		// which is a tool error, not the request's deadline.
		slow := at.StarlarkTool("slow_gate", gateSource, at.Object(map[string]any{"key": at.String()}, "key"), []map[string]any{at.Ref("spin"), at.Ref("graphql")})
		slow["execution"] = map[string]any{"responseTimeout": "1s"}
		env.CreateAction(at.NewID(), slow)
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "patient", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("slow_gate")}}.Input())
		began = time.Now()
		res := callTool(t, env.Connect("patient", env.Token(principal, "alice"), rev), "slow_gate", map[string]any{"key": gateKey(t)})
		if took := time.Since(began); !res.IsError || toolErrorCode(res) != "action_timeout" || took > 3*time.Second {
			t.Errorf("a tool past its own timeout: isError %v code %q after %v", res.IsError, toolErrorCode(res), took)
		}
	})
}

// bumpSource reads a counter, waits at a gate, then writes the counter plus
// one: two bumps that overlap conflict when the second commits.
const bumpSource = `
def run(event):
    found = graphql("query { kv { value(namespace: \"c\", key: \"n\") { value } } }")
    n = found["kv"]["value"]["value"]["n"]
    tools.gate({"key": event["data"]["key"], "spins": event["data"].get("spins", 60)})
    graphql("mutation($v: JSON!) { kv { put(namespace: \"c\", key: \"n\", value: $v) { key } } }", variables = {"v": {"n": n + 1}})
    return {"n": n + 1}
`

// defineBump defines the server counter with the tool bump; a
// responseTimeout not "" is the server's.
func defineBump(env *at.Env, responseTimeout string) string {
	defineGate(env)
	env.CreateAction(at.NewID(), at.StarlarkTool("bump", bumpSource, at.Object(map[string]any{"key": at.String(), "spins": at.Integer()}, "key"),
		[]map[string]any{at.Ref("gate"), at.Ref("graphql")}))
	serverID := at.NewID()
	env.CreateAction(serverID, at.ServerSpec{Name: "counter", Intent: "NONE", Mode: "LIVE", Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("bump")}, ResponseTimeout: responseTimeout}.Input())
	env.MustGraphQL(`mutation { kv { put(namespace: "c", key: "n", value: {n: 0}) { key } } }`, nil)
	return serverID
}

func bumpRequest(rev, key string, spins int) ([]byte, http.Header) {
	body, header := at.Request{Method: "tools/call", Revision: rev, Params: map[string]any{"name": "bump", "arguments": map[string]any{"key": key, "spins": spins}}}.Body()
	return body, header
}

// ACT-105, ACT-119, ACT-568, ACT-516: nothing leaves before it is recorded.
// Two overlapping LIVE calls write the same row; the second completion
// fails its compare-and-set, so its client gets a retryable
// mcp_transaction_error and no content, and the request is recorded FAILED
// in a separate write with that error, its calls rolled back, its writes
// not applied.
func TestFailedCommitSendsNoContent(t *testing.T) {
	each(t, at.Options{}, func(t *testing.T, env *at.Env, rev string) {
		serverID := defineBump(env, "")
		key := gateKey(t)
		replies := make([]at.Reply, 2)
		var wg sync.WaitGroup
		for i, user := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body, header := bumpRequest(rev, key, 60)
				reply, err := at.PostBody(context.Background(), at.HTTPClient(""), env.Endpoint("counter"), env.Token(principal, user), body, header)
				if err != nil {
					t.Error(err)
				}
				replies[i] = reply
			}()
		}
		waitFor(t, "both bumps to run", func() bool { return len(requests(env, serverID, "tools/call")) == 2 })
		// Both must have read the counter before either commits: they read it
		// first thing, but nothing a running tool does shows before its
		// request commits (that is the rule under test), so no condition can
		// be polled for. One second gives the later one time to take that
		// first step.
		time.Sleep(time.Second)
		openGate(env, key)
		wg.Wait()
		var won, lost *at.Reply
		for i := range replies {
			if replies[i].Result() != nil {
				won = &replies[i]
			} else {
				lost = &replies[i]
			}
		}
		if won == nil || lost == nil {
			t.Fatalf("want one success and one failure, got %s and %s", replies[0], replies[1])
		}
		if lost.Status != 503 || lost.ErrorCode() != -32603 || lost.DataCode() != "mcp_transaction_error" || at.Dig(lost.RPC, "error", "data", "retryable") != true {
			t.Errorf("the failed commit answered %s", lost)
		}
		if strings.Contains(string(lost.Body), `"n"`) || strings.Contains(string(lost.Body), "content") {
			t.Errorf("the failed commit's answer carries content: %s", lost.Body)
		}
		if got := at.Dig(env.KV("c", "n"), "n"); got != 1.0 {
			t.Errorf("counter %v after one committed bump, want 1", got)
		}
		for _, r := range requests(env, serverID, "tools/call") {
			switch r["status"] {
			case "SUCCEEDED":
				if !jsonEqual(r["output"], won.Result()) {
					t.Errorf("the committed request's output %s differs from what its client got %s", asJSON(r["output"]), asJSON(won.Result()))
				}
			case "FAILED":
				if !jsonEqual(at.Dig(r, "output", "error"), at.Dig(lost.RPC, "error")) || at.Dig(r, "error", "code") != "mcp_transaction_error" {
					t.Errorf("the failed request recorded output %s error %s, its client got %s", asJSON(r["output"]), asJSON(r["error"]), lost.Body)
				}
				calls := r["calls"].([]any)
				if len(calls) != 1 || at.Dig(calls[0], "rolledBackByExecutionId") != r["id"] {
					t.Errorf("the failed request's calls: %s", asJSON(calls))
				}
				if len(r["uses"].([]any)) != 0 {
					t.Errorf("an uncommitted output was recorded as used: %s", asJSON(r["uses"]))
				}
				session := env.Session(serverID, r["sessionId"].(string))
				if in := session["inputs"].([]any)[0].(map[string]any); in["state"] != "CONSUMED" || in["calls"].(float64) < 1 {
					t.Errorf("the failed request's session input %s", asJSON(in))
				}
			default:
				t.Errorf("a request recorded %v", r["status"])
			}
		}
	})
}

// ACT-119, ACT-105: a completion that cannot get its locks fails after the
// store's lock timeout, and the client gets an error and no content: on
// Postgres another connection holds the written row FOR UPDATE, on SQLite
// another connection holds the database's write lock past the busy timeout.
// On SQLite the lock outlasts the fallback record too, so while it is held
// the request stays RUNNING with no output, a record that claims no answer,
// and once it is released the kept write records it FAILED. On Postgres the
// fallback touches no locked row and records the request FAILED at once.
// The server's response timeout is short, as the fallback is tried until
// that deadline before the client is answered.
func TestLockedCommitSendsNoContent(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		// On Postgres the answer comes at the store's lock timeout, well
		// before the deadline; a loaded machine once stretched that past
		// 5 s, so the deadline there leaves room.
		timeout := "5s"
		if env.Dialect == store.Postgres {
			timeout = "15s"
		}
		serverID := defineBump(env, timeout)
		db := env.OpenDatabase()
		c := ctx(t)
		conn, err := db.Conn(c)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var tx *sql.Tx
		lock := func() {
			tx, err = conn.BeginTx(c, nil)
			if err != nil {
				t.Fatal(err)
			}
			if env.Dialect == store.Postgres {
				var version int64
				err = tx.QueryRowContext(c, `SELECT version FROM rows WHERE tbl = 'KVValue' AND key = 'c/n' FOR UPDATE`).Scan(&version)
			} else {
				_, err = tx.ExecContext(c, `UPDATE rows SET updated_at = updated_at WHERE tbl = 'KVValue' AND key = 'c/n'`)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if env.Dialect == store.Postgres {
			lock() // before the request: admission does not touch the row
		}
		body, header := bumpRequest(at.Revision2026, gateKey(t), 6)
		replied := make(chan at.Reply, 1)
		go func() {
			reply, err := at.PostBody(context.Background(), at.HTTPClient(""), env.Endpoint("counter"), env.Token(principal, "alice"), body, header)
			if err != nil {
				t.Error(err)
			}
			replied <- reply
		}()
		waitFor(t, "the bump to run", func() bool { return len(requests(env, serverID, "tools/call")) == 1 })
		if env.Dialect == store.SQLite {
			lock() // while the tool runs: admission needs the write lock too
		}
		reply := <-replied
		if reply.Status != 503 || reply.DataCode() != "mcp_transaction_error" || reply.Result() != nil || strings.Contains(string(reply.Body), "content") {
			tx.Rollback()
			t.Fatalf("a locked commit answered %s", reply)
		}
		// Read while the lock is held: SQLite's readers do not wait on it.
		request := last(t, requests(env, serverID, "tools/call"))
		tx.Rollback()
		failedAsAnswered := func(request map[string]any) bool {
			return request["status"] == "FAILED" && jsonEqual(at.Dig(request, "output", "error"), at.Dig(reply.RPC, "error"))
		}
		if env.Dialect == store.Postgres {
			// The fallback record touches no locked row: FAILED, with the
			// error its client got.
			if !failedAsAnswered(request) {
				t.Errorf("the request whose completion could not commit reads %v with output %s", request["status"], asJSON(request["output"]))
			}
		} else {
			if request["status"] != "RUNNING" || request["output"] != nil {
				t.Errorf("while the lock is held, the request whose records could not commit reads %v with output %s", request["status"], asJSON(request["output"]))
			}
			waitFor(t, "the kept record write to settle the request FAILED", func() bool {
				return failedAsAnswered(last(t, requests(env, serverID, "tools/call")))
			})
		}
		if got := at.Dig(env.KV("c", "n"), "n"); got != 0.0 {
			t.Errorf("counter %v, want 0: nothing was committed", got)
		}
	})
}
