package gateway_test

import (
	"strings"
	"testing"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// ACT-045, ACT-046, ACT-049: a server answers at /mcp/v1/<account>/<name>,
// its registry name, over Streamable HTTP (a JSON response to a client that
// accepts JSON and an event stream); its action ID in the path names no
// server.
func TestEndpointIsTheRegistryName(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "fraud-ops", Intent: "NONE", Policies: at.Everything()}.Input())
		token := env.Token(principal, "alice")
		reply := env.Post("fraud-ops", token, at.Request{Method: "server/discover"})
		if reply.Status != 200 || reply.Result() == nil {
			t.Fatalf("server/discover at /mcp/v1/%s/fraud-ops: %s", at.Account, reply)
		}
		if ct := reply.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		byID := env.Post(serverID, token, at.Request{Method: "server/discover"})
		if byID.Status != 404 || byID.DataCode() != "mcp_server_not_found" {
			t.Fatalf("the action's ID in the path: %s, want 404 mcp_server_not_found", byID)
		}
	})
}

// ACT-082: arguments are read only from the body; an Mcp-Param header is
// never an argument: a required argument sent only as a header is missing.
func TestMcpParamHeadersAreNotArguments(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), at.CELTool("double", "event.data.n * 2.0", at.Object(map[string]any{"n": map[string]any{"type": "number"}}, "n")))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "headers", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("double")}}.Input())
		reply := env.Post("headers", env.Token(principal, "alice"), at.Request{
			Method: "tools/call", Params: map[string]any{"name": "double", "arguments": map[string]any{}},
			Header: map[string]string{"Mcp-Param-N": "21"},
		})
		if reply.Status != 200 || reply.Result()["isError"] != true {
			t.Fatalf("a required argument sent only as a header: %s, want a schema error result", reply)
		}
		request := last(t, requests(env, serverID, "tools/call"))
		calls, _ := request["calls"].([]any)
		if len(calls) != 1 {
			t.Fatalf("the call was recorded %d times, want once", len(calls))
		}
		input := at.Dig(calls[0], "input")
		if n, present := input.(map[string]any)["n"]; present {
			t.Fatalf("the recorded input has n = %v from a header", n)
		}
	})
}

// ACT-495, ACT-497: a request's session input is CLAIMED while it runs, and
// once its outcome is recorded it is CONSUMED with the calls it made,
// counting those beneath its one call.
func TestSessionInputClaimedWhileRunning(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		defineGate(env)
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "claims", Intent: "NONE", Mode: "LIVE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("gate")}}.Input())
		token := env.Token(principal, "alice")
		key := gateKey(t)
		done := make(chan at.Reply, 1)
		go func() {
			done <- env.Post("claims", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "gate", "arguments": map[string]any{"key": key}}})
		}()
		sessionID := at.SessionIDFor(principal, "alice")
		state := func() string {
			session := env.Session(serverID, sessionID)
			inputs, _ := session["inputs"].([]any)
			if len(inputs) == 0 {
				return ""
			}
			s, _ := inputs[len(inputs)-1].(map[string]any)["state"].(string)
			return s
		}
		waitFor(t, "the running request's input", func() bool { return state() != "" })
		if got := state(); got != "CLAIMED" {
			t.Fatalf("while the call runs its input is %q, want CLAIMED", got)
		}
		openGate(env, key)
		reply := <-done
		if reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("gate: %s", reply)
		}
		inputs := env.Session(serverID, sessionID)["inputs"].([]any)
		final := inputs[len(inputs)-1].(map[string]any)
		spins, _ := at.Dig(reply.Result(), "structuredContent", "spins").(float64)
		// gate's own call, a graphql() read per loop, and per spin the spin
		// call and its sixteen burns, then the read that found the gate open.
		want := 1 + int(spins)*(1+1+16) + 1
		if final["state"] != "CONSUMED" || final["calls"] != float64(want) {
			t.Fatalf("after the call its input is %v with %v calls, want CONSUMED with %d", final["state"], final["calls"], want)
		}
	})
}

// ACT-566, ACT-569, ACT-578: a JSON-RPC error carrying the platform's
// identifier puts it in error.data.code, with -32602 for an error of the
// request, and the execution's invocation.error keeps the cause.
func TestErrorCarriesItsCodeAndIsRecorded(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "errors", Intent: "NONE", Policies: at.Everything()}.Input())
		reply := env.Post("errors", env.Token(principal, "alice"), at.Request{Method: "tools/call", Params: map[string]any{"name": "nothing-here"}})
		if reply.ErrorCode() != -32602 || reply.DataCode() != "tool_not_declared" || at.Dig(reply.RPC, "error", "data", "tool") != "nothing-here" {
			t.Fatalf("an undeclared tool: %s", reply)
		}
		request := last(t, requests(env, serverID, "tools/call"))
		if request["status"] != "FAILED" || at.Dig(request, "invocation", "error", "code") != "tool_not_declared" {
			t.Fatalf("the request's record: status %v, invocation %s", request["status"], asJSON(request["invocation"]))
		}
	})
}

// ACT-516, ACT-520: a request whose admission could not get its session's
// lock in time is refused with a retryable mcp_transaction_error, and that
// refusal is recorded outside the session: the session's log and its
// executions are what the admitted requests made, no more.
func TestContendedAdmissionIsRecordedOutsideTheSession(t *testing.T) {
	eachDialect(t, at.Options{}, func(t *testing.T, env *at.Env) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "contended", Intent: "NONE", Policies: at.Everything()}.Input())
		token := env.Token(principal, "alice")
		if reply := env.Post("contended", token, at.Request{Method: "tools/list"}); reply.Status != 200 {
			t.Fatalf("the first request: %s", reply)
		}
		sessionID := at.SessionIDFor(principal, "alice")
		c := ctx(t)
		tx, err := env.OpenDatabase().BeginTx(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if env.Dialect == store.Postgres {
			var id string
			err = tx.QueryRowContext(c, `SELECT id FROM sessions WHERE id = $1 FOR UPDATE`, sessionID).Scan(&id)
		} else {
			_, err = tx.ExecContext(c, `UPDATE sessions SET next_seq = next_seq WHERE id = ?`, sessionID)
		}
		if err != nil {
			t.Fatal(err)
		}
		reply := env.Post("contended", token, at.Request{Method: "tools/list"})
		tx.Rollback()
		if reply.Status != 503 || reply.DataCode() != "mcp_transaction_error" || at.Dig(reply.RPC, "error", "data", "retryable") != true {
			t.Fatalf("a request whose session stays locked: %s", reply)
		}
		inSession := env.ExecutionsWhere(map[string]any{"actionId": serverID, "sessionId": sessionID})
		if len(inSession) != 1 {
			t.Fatalf("%d executions in the session, want the 1 admitted", len(inSession))
		}
		var refusals []map[string]any
		for _, e := range env.Executions(serverID) {
			if e["role"] == "refusal" {
				refusals = append(refusals, e)
			}
		}
		// On SQLite the lock that refused the request also keeps its refusal
		// from being recorded (the count is best effort); on Postgres only
		// the session's row is locked.
		if env.Dialect == store.Postgres && len(refusals) != 1 {
			t.Fatalf("%d refusals recorded, want 1", len(refusals))
		}
		for _, refusal := range refusals {
			if refusal["sessionId"] != nil || at.Dig(refusal, "invocation", "error", "code") != "mcp_transaction_error" {
				t.Fatalf("the refusal's record: %s", asJSON(refusal))
			}
		}
	})
}
