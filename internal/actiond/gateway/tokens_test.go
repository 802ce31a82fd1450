package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/clock"
)

// memoryKeys is a key store for a second, foreign issuer.
type memoryKeys struct{ key []byte }

func (m *memoryKeys) LoadSigningKey(context.Context) ([]byte, bool, error) {
	return m.key, m.key != nil, nil
}
func (m *memoryKeys) SaveSigningKey(_ context.Context, key []byte) ([]byte, error) {
	m.key = key
	return key, nil
}

// ACT-051, ACT-056, ACT-059, ACT-060, ACT-061, ACT-062, ACT-063, ACT-064, ACT-065, ACT-066, ACT-067, ACT-068, ACT-069, ACT-071, ACT-094, ACT-106, ACT-528: each
// token refusal gets its status, header and body: 401 with
// WWW-Authenticate naming the server's Protected Resource Metadata and
// scope openid for a missing, expired, wrongly addressed or foreign token
// (not recorded); 404 mcp_server_not_found for an account the token does
// not name (not recorded); 403 mcp_forbidden without INVOKE (recorded).
func TestTokenRefusals(t *testing.T) {
	eachFake(t, func(t *testing.T, env *at.Env, rev string, fake *clock.Fake) {
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "guarded", Intent: "NONE", Policies: at.Everything()}.Input())
		env.CreateAction(at.NewID(), at.ServerSpec{Name: "neighbour", Intent: "NONE", Policies: at.Everything()}.Input())
		env.PutPrincipal("selector", []map[string]any{at.Allow([]string{"SELECT"}, "*")})
		metadata := env.URL + "/.well-known/oauth-protected-resource/mcp/v1/" + at.Account + "/guarded"
		challenge := `Bearer resource_metadata="` + metadata + `", scope="openid"`

		expired := env.Token(principal, "alice")
		foreignIssuer, err := auth.NewLocalIssuer(context.Background(), auth.LocalIssuerOptions{URL: "http://127.0.0.1:1", KeyStore: &memoryKeys{}, Clock: fake})
		if err != nil {
			t.Fatal(err)
		}
		foreign, _ := foreignIssuer.Mint(auth.MintOptions{Principal: principal, Subject: "alice", Audience: auth.MCPAudience(env.URL)})
		// The same key under another issuer URL: a wrong iss.
		wrongIssuer, err := auth.NewLocalIssuer(context.Background(), auth.LocalIssuerOptions{URL: "http://127.0.0.1:2", KeyStore: env.Server.Store, Clock: fake})
		if err != nil {
			t.Fatal(err)
		}
		misissued, _ := wrongIssuer.Mint(auth.MintOptions{Principal: principal, Subject: "alice", Audience: auth.MCPAudience(env.URL)})
		valid := env.Token(principal, "alice")
		tampered := valid[:len(valid)-4] + flip(valid[len(valid)-4:])
		fake.Advance(time.Hour + 5*time.Minute)
		graphqlToken := env.MintToken(auth.MintOptions{Principal: principal, Subject: "alice", Audience: auth.GraphQLAudience(env.URL)})
		otherRegion := env.MintToken(auth.MintOptions{Principal: principal, Subject: "alice", Audience: "http://other.region.example/mcp"})
		valid = env.Token(principal, "alice")

		before := len(env.Executions(serverID))
		refused := func(reason auth.PublicReason) string {
			_, sentence := auth.Public(refusal(reason))
			return challenge + `, error="invalid_token", error_description="` + sentence + `"`
		}
		for _, c := range []struct {
			name, token, header string
			reason              auth.PublicReason
		}{
			{"no token", "", challenge, auth.PublicMissing},
			{"expired", expired, refused(auth.PublicExpired), auth.PublicExpired},
			{"foreign issuer", foreign, refused(auth.PublicUnknownIssuer), auth.PublicUnknownIssuer},
			{"wrong issuer", misissued, refused(auth.PublicUnknownIssuer), auth.PublicUnknownIssuer},
			{"tampered", tampered, refused(auth.PublicInvalidSignature), auth.PublicInvalidSignature},
			{"GraphQL audience", graphqlToken, refused(auth.PublicWrongAudience), auth.PublicWrongAudience},
			{"another region", otherRegion, refused(auth.PublicWrongAudience), auth.PublicWrongAudience},
		} {
			reply := env.Post("guarded", c.token, at.Request{Method: "tools/list", ID: 7, Revision: rev})
			if reply.Status != 401 || reply.Header.Get("WWW-Authenticate") != c.header {
				t.Errorf("%s: %d WWW-Authenticate %q, want 401 %q", c.name, reply.Status, reply.Header.Get("WWW-Authenticate"), c.header)
			}
			if reply.ErrorCode() != -32001 || reply.DataCode() != "mcp_unauthorized" || at.Dig(reply.RPC, "id") != 7.0 {
				t.Errorf("%s: body %s", c.name, reply.Body)
			}
			// The body says which kind of check failed, and no more.
			if at.Dig(reply.RPC, "error", "data", "reason") != string(c.reason) || strings.Contains(string(reply.Body), "127.0.0.1") {
				t.Errorf("%s: body %s, want reason %s", c.name, reply.Body, c.reason)
			}
		}
		// ACT-069: an account the token does not name.
		otherAccount := env.MintToken(auth.MintOptions{Principal: principal, Subject: "alice", Accounts: []string{"999999999999"}})
		reply := env.Post("guarded", otherAccount, at.Request{Method: "tools/list", Revision: rev})
		if reply.Status != 404 || reply.DataCode() != "mcp_server_not_found" || at.Dig(reply.RPC, "error", "data", "name") != "guarded" {
			t.Errorf("another account: %s", reply)
		}
		if n := len(env.Executions(serverID)); n != before {
			t.Errorf("refusals before or at the token check were recorded (%d → %d)", before, n)
		}
		// ACT-071, ACT-106: read but no INVOKE is 403, recorded.
		reply = env.Post("guarded", env.Token("selector", "sam"), at.Request{Method: "tools/list", Revision: rev})
		if reply.Status != 403 || reply.DataCode() != "mcp_forbidden" || reply.ErrorCode() != -32602 {
			t.Errorf("no INVOKE: %s", reply)
		}
		records := env.Executions(serverID)
		if len(records) != before+1 || records[len(records)-1]["status"] != "FAILED" || records[len(records)-1]["caller"] != "selector" {
			t.Errorf("the 403 was not recorded FAILED: %s", asJSON(records[before:]))
		}
		// ACT-060, ACT-051: one token reaches every server; each request
		// carries its own.
		if reply := env.Post("neighbour", valid, at.Request{Method: "tools/list", Revision: rev}); reply.Status != 200 {
			t.Errorf("a token at another server: %s", reply)
		}
		s := env.Connect("guarded", valid, rev)
		listTools(t, s)
		if reply := env.Post("guarded", "", at.Request{Method: "tools/list", Revision: rev}); reply.Status != 401 {
			t.Errorf("a request without a token after one with: %s", reply)
		}
		// ACT-094, ACT-095: refused before the token check: not recorded.
		before = len(env.Executions(serverID))
		mismatched := env.Post("guarded", valid, at.Request{Method: "tools/list", Header: map[string]string{"Mcp-Protocol-Version": "2025-06-18"}})
		old := env.Post("guarded", valid, at.Request{Method: "tools/list", Revision: "2024-11-05"})
		if mismatched.Status != 400 || old.Status != 400 || len(env.Executions(serverID)) != before {
			t.Errorf("pre-token refusals: %s, %s, %d records", mismatched, old, len(env.Executions(serverID))-before)
		}

		// ACT-047, ACT-056: the metadata names the endpoint and the issuer.
		resp, err := http.Get(metadata)
		if err != nil {
			t.Fatal(err)
		}
		var prm auth.ProtectedResource
		json.NewDecoder(resp.Body).Decode(&prm)
		resp.Body.Close()
		if prm.Resource != env.Endpoint("guarded") || len(prm.AuthorizationServers) == 0 || prm.ScopesSupported[0] != "openid" {
			t.Errorf("metadata %+v", prm)
		}
		// ACT-061: an MCP token is refused at the GraphQL API.
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/financial/v1/graphql", bytes.NewReader([]byte(`{"query":"{ kv { value(namespace: \"a\", key: \"b\") { value } } }"}`)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+valid)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("an MCP token at the GraphQL API: %d %s", resp.StatusCode, body)
		}
	})
}

// refusal is an auth error whose public reason is the one given.
func refusal(reason auth.PublicReason) error {
	internal := map[auth.PublicReason]error{
		auth.PublicExpired: auth.ErrExpired, auth.PublicInvalidSignature: auth.ErrBadSignature,
		auth.PublicUnknownIssuer: auth.ErrUnknownIssuer, auth.PublicWrongAudience: auth.ErrWrongAudience,
	}
	return internal[reason]
}

func flip(s string) string {
	if strings.HasPrefix(s, "A") {
		return "B" + s[1:]
	}
	return "A" + s[1:]
}
