package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// What a new user trips on: each test runs the real binary.

// A second `actiond serve` on the data directory another serves is
// refused, naming the first's pid and address; the first serves on,
// unharmed, and `actiond token` still signs for it. Once it has gone (even
// killed), the directory is free.
func TestSecondServeOnOneDataDirectoryIsRefused(t *testing.T) {
	first := serve(t, store.SQLite)
	second := actiond(t, "serve", "--addr", at.FreeAddr(t), "--data", first.Store.DataDir)
	for _, want := range []string{
		"the data directory " + first.Store.DataDir + " is in use by another actiond serve",
		fmt.Sprintf("pid %d", first.PID()), "listening on " + first.Addr, "serving " + first.PublicURL,
		"hint: Stop that process first, or pass this one another --data directory",
	} {
		if !strings.Contains(second.stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, second.stderr)
		}
	}
	if second.code != 1 {
		t.Errorf("exit %d", second.code)
	}
	env := first.Env(store.SQLite)
	if reply := env.Post("default", first.Token("local", "ada"), at.Request{Method: "tools/list"}); reply.Status != 200 {
		t.Fatalf("the first serve after the second tried: %s", reply)
	}
	for _, symptom := range []string{"declared dead", "settled the work"} {
		if strings.Contains(first.Log(), symptom) {
			t.Errorf("the first serve was disturbed (%s):\n%s", symptom, first.Log())
		}
	}
	first.Kill()
	again := at.StartProcess(t, binary, first.Store, "")
	if reply := again.Env(store.SQLite).Post("default", again.Token("local", "ada"), at.Request{Method: "tools/list"}); reply.Status != 200 {
		t.Fatalf("a serve after the first was killed: %s", reply)
	}
}

// On Postgres any number of processes serve one database, at one public
// URL: a process started at another while one serves is refused, naming
// it, so that neither's tokens stop working at the other; once they have
// stopped, a new URL takes over.
func TestPostgresProcessesServeOnePublicURL(t *testing.T) {
	opts := withSchema(t, storetest.Options(t, store.Postgres))
	public := "http://" + at.FreeAddr(t)
	first := at.StartProcess(t, binary, opts, public)
	other := "http://" + at.FreeAddr(t)
	refused := actiond(t, append([]string{"serve", "--addr", at.FreeAddr(t), "--public-url", other}, at.StoreArgs(opts)...)...)
	for _, want := range []string{
		fmt.Sprintf("another actiond process (pid %d", first.PID()), "listening on " + first.Addr, "serves this database at " + public,
		"hint: Start this one with --public-url " + public,
	} {
		if refused.code != 1 || !strings.Contains(refused.stderr, want) {
			t.Errorf("exit %d, the refusal lacks %q:\n%s", refused.code, want, refused.stderr)
		}
	}
	second := at.StartProcess(t, binary, opts, public)
	token := second.Token("local", "ada")
	for _, p := range []*at.Process{first, second} {
		if reply := p.Env(store.Postgres).Post("default", token, at.Request{Method: "tools/list"}); reply.Status != 200 {
			t.Fatalf("a token of the shared URL at %s: %s", p.URL, reply)
		}
	}
	first.Stop()
	second.Stop()
	moved := at.StartProcess(t, binary, opts, other)
	if !strings.Contains(moved.Log(), "this database was last served at "+public) {
		t.Errorf("the new URL took over without saying so:\n%s", moved.Log())
	}
	if reply := moved.Env(store.Postgres).Post("default", moved.Token("local", "ada"), at.Request{Method: "tools/list"}); reply.Status != 200 {
		t.Fatalf("after the move: %s", reply)
	}
}

// toolErrors makes two requests the client got a tool error for: one
// refused for its missing intent (no call), one whose CEL does not compile
// (its one call FAILED).
func toolErrors(t *testing.T, env *at.Env, token string) {
	t.Helper()
	noIntent := at.Request{Method: "tools/call", Params: map[string]any{"name": "cel", "arguments": map[string]any{"expression": "1"}}}
	for _, q := range []at.Request{noIntent, celCall("1 +")} {
		reply := env.Post("default", token, q)
		if reply.Status != 200 || at.Dig(reply.Result(), "isError") != true {
			t.Fatalf("a tool error: %s", reply)
		}
	}
}

// A request answered with a tool error reads TOOL_ERROR in every view a
// person reads, as in the explorer: `executions`, `execution ID`, their
// --json, and GraphQL's outcome; the record keeps SUCCEEDED.
// ACT-102: GraphQL's status of each is still SUCCEEDED.
// ACT-113: the error the views show is what invocation.output recorded.
func TestToolErrorsReadAsToolErrors(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	db := at.StoreArgs(p.Store)
	toolErrors(t, env, p.Token("local", "ada"))

	table := mustActiond(t, append([]string{"executions"}, db...)...)
	rows := columns(t, table, requestColumns...)
	if len(rows) != 2 || strings.Contains(table, "SUCCEEDED") || strings.Count(table, "TOOL_ERROR") != 2 {
		t.Fatalf("executions:\n%s", table)
	}
	var list []executionRow
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"executions", "--json"}, db...)...)), &list); err != nil {
		t.Fatal(err)
	}
	codes := []string{"intent_required", "CEL_EVALUATION_ERROR"}
	for i, row := range list {
		if row.Status != "TOOL_ERROR" || row.RecordedStatus != "SUCCEEDED" || row.ToolError == nil || row.ToolError.Code != codes[i] {
			t.Errorf("executions --json [%d]: %+v", i, row)
		}
	}
	for i, row := range list {
		detail := mustActiond(t, append([]string{"execution", row.ID}, db...)...)
		for _, want := range []string{"Status      TOOL_ERROR (recorded SUCCEEDED", "Tool error  " + codes[i]} {
			if !strings.Contains(detail, want) {
				t.Errorf("execution %s lacks %q:\n%s", row.ID, want, detail)
			}
		}
		var one executionRow
		if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"execution", "--json", row.ID}, db...)...)), &one); err != nil || one.Status != "TOOL_ERROR" {
			t.Errorf("execution --json %s: %+v %v", row.ID, one, err)
		}
		got := env.MustGraphQL(`query($id: ID!) { execution(id: $id) { status outcome } }`, map[string]any{"id": row.ID})
		if at.Dig(got, "execution", "status") != "SUCCEEDED" || at.Dig(got, "execution", "outcome") != "TOOL_ERROR" {
			t.Errorf("GraphQL execution %s: %v", row.ID, got)
		}
	}
	if detail := mustActiond(t, append([]string{"execution", list[1].ID}, db...)...); !strings.Contains(detail, "cel   FAILED") {
		t.Errorf("the failed call:\n%s", detail)
	}
}

// A failed call's error is listed after the call tree, never in its
// cells: the CALL column is as wide as the calls' names.
func TestCallTreeKeepsErrorsOutOfCells(t *testing.T) {
	p := serve(t, store.SQLite)
	db := at.StoreArgs(p.Store)
	toolErrors(t, p.Env(store.SQLite), p.Token("local", "ada"))
	var list []executionRow
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"executions", "--json"}, db...)...)), &list); err != nil {
		t.Fatal(err)
	}
	detail := mustActiond(t, append([]string{"execution", list[1].ID}, db...)...)
	_, tree, found := strings.Cut(detail, "\nCalls:\n")
	if !found {
		t.Fatalf("no call tree:\n%s", detail)
	}
	header, rest, _ := strings.Cut(tree, "\n")
	if !strings.HasPrefix(header, "CALL  STATUS  DURATION  EXECUTION") {
		t.Errorf("the CALL column is padded: %q", header)
	}
	call, errors, _ := strings.Cut(rest, "\n\nErrors:\n")
	if strings.Contains(call, "CEL_EVALUATION_ERROR") || !strings.HasPrefix(errors, "  cel ") || !strings.Contains(errors, `CEL_EVALUATION_ERROR: CEL expression "1 +" does not compile`) {
		t.Errorf("the error is not after the tree:\n%s", detail)
	}
}

// serve's log says nothing per request at its default level; its banner
// names the explorer, and / leads to it.
func TestServeLogAndBanner(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	token := p.Token("local", "ada")
	for range 3 {
		if reply := env.Post("default", token, celCall("1 + 2")); reply.Status != 200 {
			t.Fatalf("request: %s", reply)
		}
	}
	for _, line := range []string{"server connecting", "server session connected", "server session disconnected"} {
		if strings.Contains(p.Log(), line) {
			t.Errorf("the log has %q per request:\n%s", line, p.Log())
		}
	}
	if want := "actiond: explorer          " + p.PublicURL + "/explorer/\n"; !strings.Contains(p.Log(), want) {
		t.Errorf("the banner lacks %q:\n%s", want, p.Log())
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(p.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/explorer/" {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	page, err := http.Get(p.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(body), "<html") {
		t.Fatalf("following / : %d %.200s", page.StatusCode, body)
	}
}

// execution takes a unique prefix of an ID and lists the candidates of an
// ambiguous one; --session and --server name what exists or fail alike; a
// call shows which tool it called beneath which request.
func TestExecutionLookups(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	db := at.StoreArgs(p.Store)
	token := p.Token("local", "ada")
	if reply := env.Post("default", token, celCall("1 + 2")); reply.Status != 200 {
		t.Fatalf("request: %s", reply)
	}
	// Requests until two begin alike, which 17 requests must.
	var ambiguous string
	for tries := 0; ambiguous == "" && tries < 17; tries++ {
		env.Post("default", token, at.Request{Method: "tools/list"})
		var list []executionRow
		if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"executions", "--json"}, db...)...)), &list); err != nil {
			t.Fatal(err)
		}
		byFirst := map[byte]int{}
		for _, row := range list {
			if byFirst[row.ID[0]]++; byFirst[row.ID[0]] == 2 {
				ambiguous = row.ID[:1]
			}
		}
	}
	r := actiond(t, append([]string{"execution", ambiguous}, db...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "executions begin with "+ambiguous+":\n  "+ambiguous) || !strings.Contains(r.stderr, "hint: Give more of the ID.") {
		t.Errorf("an ambiguous prefix: exit %d\n%s", r.code, r.stderr)
	}

	var list []executionRow
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"executions", "--json"}, db...)...)), &list); err != nil {
		t.Fatal(err)
	}
	request := list[0]
	detail := mustActiond(t, append([]string{"execution", request.ID[:13]}, db...)...)
	if !strings.Contains(detail, "Execution  "+request.ID) || !strings.Contains(detail, "Request    tools/call cel") {
		t.Fatalf("a prefix of %s:\n%s", request.ID, detail)
	}
	var full executionRow
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"execution", "--json", request.ID}, db...)...)), &full); err != nil || len(full.Calls) != 1 {
		t.Fatalf("execution --json: %+v %v", full, err)
	}
	call := full.Calls[0]
	child := mustActiond(t, append([]string{"execution", call.ID}, db...)...)
	for _, want := range []string{"Call       cel (native tool)", "Request    tools/call cel, execution " + request.ID + " (server default, version 1)", "Session    5:local:ada"} {
		if !strings.Contains(child, want) {
			t.Errorf("a call's view lacks %q:\n%s", want, child)
		}
	}
	if strings.Contains(child, "version 0") || strings.Contains(child, "Server     cel") {
		t.Errorf("a call shown as a request:\n%s", child)
	}
	var childJSON executionRow
	if err := json.Unmarshal([]byte(mustActiond(t, append([]string{"execution", "--json", call.ID}, db...)...)), &childJSON); err != nil ||
		childJSON.Action == nil || childJSON.Action.Name != "cel" || !childJSON.Action.Native || childJSON.Request == nil || childJSON.Request.ID != request.ID {
		t.Errorf("a call's --json: %+v %v", childJSON, err)
	}

	for _, args := range [][]string{{"executions", "--session", "nope"}, {"executions", "--server", "nope"}, {"sessions", "--server", "nope"}} {
		r := actiond(t, append(args, db...)...)
		if r.code != 1 || !strings.Contains(r.stderr, `"nope"`) || !strings.Contains(r.stderr, "hint: ") || r.stdout != "" {
			t.Errorf("%v: exit %d, %q %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := actiond(t, append([]string{"executions", "--session", "nope"}, db...)...); !strings.Contains(r.stderr, `no session "nope"`) {
		t.Errorf("--session nope: %s", r.stderr)
	}
	if names := mustActiond(t, append(append([]string{"__complete", "sessions"}, db...), "--server", "")...); !strings.HasPrefix(names, "default\n") {
		t.Errorf("sessions --server completes %q", names)
	}
}

// executions --follow prints every row in the header's columns: later
// rows wider than the first ones are cut short rather than shifted.
func TestFollowRowsAlignWithTheHeader(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	db := at.StoreArgs(p.Store)
	if reply := env.Post("default", p.Token("local", "ada"), celCall("1 + 2")); reply.Status != 200 {
		t.Fatalf("request: %s", reply)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, binary, append([]string{"executions", "--follow"}, db...)...)
	follow.Env = environment()
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); follow.Wait() }()
	lines := bufio.NewReader(stdout)
	var printed []string
	readLine := func() {
		t.Helper()
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("--follow: %v after\n%s", err, strings.Join(printed, ""))
		}
		printed = append(printed, line)
	}
	readLine() // the header
	readLine() // the first request
	long := p.Token("local", "bartholomew-of-the-long-subject-name")
	if reply := env.Post("default", long, celCall("2 * 21")); reply.Status != 200 {
		t.Fatalf("request: %s", reply)
	}
	readLine()
	if reply := env.Post("default", long, at.Request{Method: "nonexistent/method"}); reply.Status != 404 {
		t.Fatalf("a refusal: %s", reply)
	}
	readLine()
	table := strings.Join(printed, "")
	columns(t, table, requestColumns...)
	if !strings.Contains(printed[2], "bartholomew…") || !strings.Contains(printed[3], "FAILED (refused)") {
		t.Errorf("followed:\n%s", table)
	}
}

// A 2026-07-28 request without clientCapabilities is refused before its
// token with -32602 whose data names the field and says what to send.
// ACT-094: refused before its token is checked, it is not recorded.
func TestMissingClientCapabilitiesSaysWhatToSend(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}}}`)
	_, header := at.Request{Method: "tools/list"}.Body()
	reply := env.PostBody("default", p.Token("local", "ada"), body, header)
	if reply.Status != 400 || at.Dig(reply.RPC, "error", "code") != float64(-32602) {
		t.Fatalf("reply: %s", reply)
	}
	data, _ := at.Dig(reply.RPC, "error", "data").(map[string]any)
	hint, _ := data["hint"].(string)
	if data["code"] != "mcp_bad_request" || data["reason"] != "missing _meta io.modelcontextprotocol/clientCapabilities" ||
		!strings.Contains(hint, `params._meta["io.modelcontextprotocol/clientCapabilities"]`) || !strings.Contains(hint, "{} when the client declares none") {
		t.Errorf("data: %v", data)
	}
	if out := mustActiond(t, append([]string{"executions"}, at.StoreArgs(p.Store)...)...); !strings.Contains(out, "No requests recorded yet.") {
		t.Errorf("the refusal was recorded:\n%s", out)
	}
}

// createAction makes the ID it is not given and returns it; a schema that
// breaks JSON Schema's rules says where and how; a misspelt property is
// an unknown property with the nearest one, in a document and in
// variables.
func TestGraphQLSaysWhatIsWrong(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	create := `mutation($input: ActionInput!) { actions { createAction(input: $input) { id version } } }`
	tool := func(schema map[string]any) map[string]any {
		return map[string]any{"name": "double", "kind": "cel", "config": map[string]any{"expression": "event.data.n * 2"}, "tool": map[string]any{"inputSchema": schema}}
	}
	created := env.MustGraphQL(create, map[string]any{"input": tool(at.Object(map[string]any{"n": at.Integer()}, "n"))})
	id, _ := at.Dig(created, "actions", "createAction", "id").(string)
	if !uuidPattern.MatchString(id) || len(id) != 36 {
		t.Fatalf("createAction without an id: %v", created)
	}
	if got := env.MustGraphQL(`query($id: ID!) { action(id: $id) { name } }`, map[string]any{"id": id}); at.Dig(got, "action", "name") != "double" {
		t.Errorf("the made ID does not name the action: %v", got)
	}

	for _, c := range []struct {
		query     string
		variables map[string]any
		message   string
	}{
		{create, map[string]any{"input": tool(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": "a"}}})},
			"tool.inputSchema: not a valid JSON Schema: properties.n.minimum must be a number, not a string"},
		{create, map[string]any{"input": tool(map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integr"}}})},
			`tool.inputSchema: not a valid JSON Schema: properties.n.type "integr" is not one of array, boolean, integer, null, number, object, string`},
		{create, map[string]any{"input": map[string]any{"nme": "double", "kind": "cel"}},
			"$input.nme: unknown property nme of ActionInput (did you mean name?)"},
		{create, map[string]any{"input": map[string]any{"name": "x", "kind": "cel", "tools": []any{map[string]any{"nme": "cel"}}}},
			"$input.tools[0].nme: unknown property nme of ToolReferenceInput (did you mean name?)"},
		{`mutation { actions { createAction(input: {nme: "double", kind: "cel"}) { id } } }`, nil,
			"unknown property nme of ActionInput (did you mean name?)"},
	} {
		resp := env.GraphQL(c.query, c.variables)
		if len(resp.Errors) != 1 || resp.Errors[0].Message != c.message {
			t.Errorf("want the one error %q, got %+v", c.message, resp.Errors)
		}
		for _, e := range resp.Errors {
			if strings.Contains(e.Message, "mem://") || strings.Contains(e.Message, "jsonschema") || strings.Contains(e.Message, "missing property") {
				t.Errorf("an unreadable error: %q", e.Message)
			}
		}
	}
}

// Arguments that do not fit a tool's input schema are a tool error that
// says how in words, every violation at its place, without the
// validator's report ("jsonschema validation failed with
// 'mem://schema.json#'"); a misspelt argument beside the required one it
// misses reads as the typo.
func TestToolArgumentsAreCheckedInWords(t *testing.T) {
	p := serve(t, store.SQLite)
	env := p.Env(store.SQLite)
	greet := at.CELTool("greet", "'Hello, ' + event.data.name", at.Object(map[string]any{"name": at.String(), "times": at.Integer()}, "name"))
	env.CreateAction(at.NewID(), greet)
	env.CreateAction(at.NewID(), at.ServerSpec{Name: "greeter", Tools: []map[string]any{at.Ref("greet")}}.Input())
	token := p.Token("local", "ada")
	for _, c := range []struct {
		arguments map[string]any
		message   string
	}{
		{map[string]any{"name": "Ada", "times": "twice"}, "the input does not match its schema: times must be a whole number, not a string"},
		{map[string]any{"nme": "Ada"}, "the input does not match its schema: unknown property nme (did you mean name?)"},
		{map[string]any{"name": 7, "times": 1.5}, "the input does not match its schema: name must be a string, not a number; times must be a whole number, not a number"},
	} {
		c.arguments["intent"] = "Greet the reviewer."
		reply := env.Post("greeter", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "greet", "arguments": c.arguments}})
		message, _ := at.Dig(reply.Result(), "_meta", "com.twisp/error", "message").(string)
		if reply.Result()["isError"] != true || message != c.message {
			t.Errorf("arguments %v: %s\nwant the message %q", c.arguments, reply, c.message)
		}
		if text := at.AsJSON(reply.Result()); strings.Contains(text, "mem://") || strings.Contains(text, "jsonschema") || strings.Contains(text, "missing property") {
			t.Errorf("arguments %v: the validator's report reached the agent: %s", c.arguments, text)
		}
	}
	if reply := env.Post("greeter", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "greet", "arguments": map[string]any{"name": "Ada", "intent": "Greet."}}}); reply.Result()["isError"] == true {
		t.Errorf("arguments that fit: %s", reply)
	}
}
