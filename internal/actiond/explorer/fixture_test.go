package explorer_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
)

const principal = server.LocalPrincipal

// noteSource leaves a note on an account through graphql(): on a server in
// preview mode the write rolls back into the call's write set.
const noteSource = `
def run(event):
    data = event["data"]
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"notes\", key: $k, value: $v) { key } } }",
        variables = {"k": data["account_id"], "v": {"note": data["text"]}})
    return {"noted": data["account_id"]}
`

// fixture is a real actiond on loopback with the server fraud-ops in
// preview mode: lookup (a cel tool), note (a Starlark tool that writes
// through graphql) and the native graphql tool.
type fixture struct {
	env      *at.Env
	serverID string
	lookupID string
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, at.Options{}) }

func newFixtureWith(t testing.TB, opts at.Options) *fixture {
	t.Helper()
	env := at.New(t, store.SQLite, opts)
	f := &fixture{env: env, serverID: at.NewID(), lookupID: at.NewID()}
	env.CreateAction(f.lookupID, at.CELTool("lookup", `{"account": event.data.account_id, "flagged": false}`,
		at.Object(map[string]any{"account_id": at.String()}, "account_id"), at.Allow([]string{"SELECT"}, "financial.*")))
	env.CreateAction(at.NewID(), at.StarlarkTool("note", noteSource,
		at.Object(map[string]any{"account_id": at.String(), "text": at.String()}, "account_id", "text"), []map[string]any{at.Ref("graphql")}))
	env.CreateAction(f.serverID, at.ServerSpec{Name: "fraud-ops", Policies: at.Everything(),
		Tools: []map[string]any{at.Ref("lookup"), at.Ref("note"), at.Ref("graphql")}}.Input())
	return f
}

// connect is an MCP host signed in as subject, speaking the current revision
// through the go-sdk client.
func (f *fixture) connect(subject string) *mcp.ClientSession {
	return f.env.Connect("fraud-ops", f.env.Token(principal, subject), at.Revision2026)
}

func (f *fixture) session(subject string) string { return at.SessionIDFor(principal, subject) }

// call makes a tools/call that must not fail at the protocol level.
func call(t testing.TB, s *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	return res
}

// requests are a session's requests as GraphQL lists them, oldest first.
func (f *fixture) requests(subject string) []map[string]any {
	return f.env.ExecutionsWhere(map[string]any{"actionId": f.serverID, "sessionId": f.session(subject)})
}

// graphqlToken is a token for the GraphQL API, as `actiond token --audience
// graphql` prints.
func (f *fixture) graphqlToken(name, subject string) string {
	return f.env.MintToken(auth.MintOptions{Principal: name, Subject: subject, Audience: auth.GraphQLAudience(f.env.URL)})
}

func (f *fixture) page(fragment string) string { return f.env.URL + "/explorer/#" + fragment }

func toolErrorCode(res *mcp.CallToolResult) string {
	code, _ := at.Dig(map[string]any(res.Meta), "com.twisp/error", "code").(string)
	return code
}
