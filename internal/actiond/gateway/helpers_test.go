package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// The principal every fixture's tokens name, allowed everything unless a
// test narrows it.
const principal = "signin"

// each runs fn on SQLite and on Postgres, at 2026-07-28 and at 2025-11-25,
// each combination with a fresh actiond.
func each(t *testing.T, opts at.Options, fn func(t *testing.T, env *at.Env, rev string)) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		for _, rev := range at.Revisions {
			t.Run(rev, func(t *testing.T) {
				t.Parallel()
				env := at.New(t, d, opts)
				env.PutPrincipal(principal, at.Everything())
				fn(t, env, rev)
			})
		}
	})
}

// eachFake is each with a fake clock of its own per combination.
func eachFake(t *testing.T, fn func(t *testing.T, env *at.Env, rev string, fake *clock.Fake)) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		for _, rev := range at.Revisions {
			t.Run(rev, func(t *testing.T) {
				t.Parallel()
				fake := clock.NewFake(at.Start)
				env := at.New(t, d, at.Options{Clock: fake})
				env.PutPrincipal(principal, at.Everything())
				fn(t, env, rev, fake)
			})
		}
	})
}

// eachDialect runs fn on SQLite and on Postgres with a fresh actiond.
func eachDialect(t *testing.T, opts at.Options, fn func(t *testing.T, env *at.Env)) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		t.Parallel()
		env := at.New(t, d, opts)
		env.PutPrincipal(principal, at.Everything())
		fn(t, env)
	})
}

// The go-sdk client's requests, their text and JSON, through actiondtest.
var (
	listTools  = at.ListTools
	callTool   = at.CallTool
	text       = at.Text
	jsonEqual  = at.JSONEqual
	asJSON     = at.AsJSON
	anyStrings = at.Strings
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// rpcError is a JSON-RPC error the go-sdk client returned.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return werr
}

func errorData(t *testing.T, werr *jsonrpc.Error) map[string]any {
	t.Helper()
	var data map[string]any
	if len(werr.Data) > 0 {
		if err := json.Unmarshal(werr.Data, &data); err != nil {
			t.Fatalf("error data %s: %v", werr.Data, err)
		}
	}
	return data
}

// toolErrorCode is the com.twisp/error code of a tool error.
func toolErrorCode(res *mcp.CallToolResult) string {
	code, _ := at.Dig(map[string]any(res.Meta), "com.twisp/error", "code").(string)
	return code
}

// serverInfo is a result's _meta serverInfo.
func serverInfo(meta mcp.Meta) (name, version string) {
	name, _ = at.Dig(map[string]any(meta), "io.modelcontextprotocol/serverInfo", "name").(string)
	version, _ = at.Dig(map[string]any(meta), "io.modelcontextprotocol/serverInfo", "version").(string)
	return name, version
}

// requests lists a server's recorded requests of one method.
func requests(env *at.Env, serverID, method string) []map[string]any {
	var out []map[string]any
	for _, e := range env.Executions(serverID) {
		if at.Dig(e, "mcpRequest", "method") == method {
			out = append(out, e)
		}
	}
	return out
}

// last returns the last of a list.
func last(t *testing.T, list []map[string]any) map[string]any {
	t.Helper()
	if len(list) == 0 {
		t.Fatal("no records")
	}
	return list[len(list)-1]
}

// asMap round-trips a value through JSON into a map.
func asMap(v any) map[string]any {
	var m map[string]any
	b, _ := json.Marshal(v)
	json.Unmarshal(b, &m)
	return m
}

// waitFor polls cond until it holds, for at most 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	at.WaitFor(t, what, 30*time.Second, cond)
}

// gateSource is a Starlark tool that runs until the KV value gate/<key>
// exists (the test opens it through GraphQL), spinning through the nested
// tool spin between reads, and answers how many spins it made; it gives up
// after spins spins (default 60).
const gateSource = `
def run(event):
    key = event["data"]["key"]
    spins = int(event["data"].get("spins", 60))
    for i in range(spins):
        found = graphql("query($k: String!) { kv { value(namespace: \"gate\", key: $k) { value } } }", variables = {"k": key})
        if found["kv"]["value"]:
            return {"opened": True, "spins": i}
        tools.spin({})
    return {"opened": False, "spins": spins}
`

// spinSource is the delay between a gate's reads: sixteen calls of burn, about 70 ms;
// a gate left closed gives up after 60 spins, about 4 s.
const spinSource = `
def run(event):
    for i in range(16):
        tools.burn({})
    return 16
`

// burnSource burns CPU for about 4 ms (most of its 1,000,000 steps).
const burnSource = `
def run(event):
    n = 0
    for i in range(60000):
        n += i
    return n
`

// defineGate creates the tools gate, spin and burn.
func defineGate(env *at.Env) {
	env.CreateAction(at.NewID(), at.StarlarkTool("burn", burnSource, nil, nil))
	env.CreateAction(at.NewID(), at.StarlarkTool("spin", spinSource, nil, []map[string]any{at.Ref("burn")}))
	env.CreateAction(at.NewID(), at.StarlarkTool("gate", gateSource, at.Object(map[string]any{"key": at.String(), "spins": at.Integer()}, "key"),
		[]map[string]any{at.Ref("spin"), at.Ref("graphql")}))
}

// openGate lets the gate tool waiting on key finish.
func openGate(env *at.Env, key string) {
	env.MustGraphQL(`mutation($k: String!) { kv { put(namespace: "gate", key: $k, value: {open: true}) { key } } }`, map[string]any{"k": key})
}

func gateKey(t *testing.T) string {
	return fmt.Sprintf("%s-%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano())
}
