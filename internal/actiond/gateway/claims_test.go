package gateway_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/policy"
)

// outsideIdP is an identity provider outside actiond whose tokens carry
// what such providers put in them: the person's email, name and phone
// number beside the claims authority depends on.
type outsideIdP struct {
	key ed25519.PrivateKey
	set []byte
}

const outsideIssuer = "https://idp.example.com"

func newOutsideIdP(t *testing.T) *outsideIdP {
	t.Helper()
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: public, KeyID: "idp-1", Algorithm: string(jose.EdDSA), Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &outsideIdP{key: private, set: set}
}

func (p *outsideIdP) issuers(publicURL string) []auth.IssuerConfig {
	return []auth.IssuerConfig{{Issuer: outsideIssuer, JWKS: p.set, Principal: "outsiders", Audiences: []string{auth.MCPAudience(publicURL)}}}
}

func (p *outsideIdP) token(t *testing.T, audience string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: p.key, KeyID: "idp-1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	all := map[string]any{"iss": outsideIssuer, "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "accounts": []string{at.Account}}
	for k, v := range claims {
		all[k] = v
	}
	token, err := jwt.Signed(signer).Claims(all).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// invocation.claims keeps only what a replay needs: the identity claims
// (iss, sub, aud, exp, iat, client_id, accounts …) and the claims the
// request's policies read (the principal's groups, the server's
// department), and drops the rest an outside identity provider put in
// the token (email, name, phone number). A replay of that request still
// runs with the original user's claims-dependent authority. A policy that
// reads the claims as a whole keeps them all.
func TestRecordedClaimsAreThoseAReplayNeeds(t *testing.T) {
	idp := newOutsideIdP(t)
	eachDialect(t, at.Options{Issuers: idp.issuers}, func(t *testing.T, env *at.Env) {
		env.CreateAction(at.NewID(), postTool(1))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "ledger", Intent: "NONE", Tools: []map[string]any{at.Ref("post")},
			Policies: []map[string]any{{"effect": "ALLOW", "actions": []any{"*"}, "resources": []any{"*"},
				"assertions": map[string]any{"fraud": `context.auth.claims["department"] == 'fraud'`}}}}.Input())
		env.PutPrincipal("outsiders", []map[string]any{{"effect": "ALLOW", "actions": []any{"*"}, "resources": []any{"*"},
			"assertions": map[string]any{"ops": "'ops' in context.auth.claims.groups"}}})
		claims := map[string]any{"sub": "ada", "client_id": "claude-code", "groups": []string{"ops"}, "department": "fraud",
			"email": "ada@example.com", "name": "Ada Lovelace", "phone_number": "+44 20 7946 0000"}
		token := idp.token(t, auth.MCPAudience(env.URL), claims)
		reply := env.Post("ledger", token, at.Request{Method: "tools/call", Params: map[string]any{"name": "post", "arguments": map[string]any{"key": "c", "amount": 2}}})
		if reply.Status != 200 || reply.Result()["isError"] == true {
			t.Fatalf("the outsider's call: %s", reply)
		}
		call := last(t, requests(env, serverID, "tools/call"))
		recorded, _ := at.Dig(env.Execution(call["id"].(string)), "invocation", "claims").(map[string]any)
		var names []string
		for name := range recorded {
			names = append(names, name)
		}
		slices.Sort(names)
		if got := strings.Join(names, ","); got != "accounts,aud,client_id,department,exp,groups,iat,iss,sub" {
			t.Errorf("recorded claims %s: %s", got, asJSON(recorded))
		}
		if strings.Contains(asJSON(env.Execution(call["id"].(string))), "ada@example.com") {
			t.Errorf("the email is in the record")
		}
		replayed := mustReplay(t, env, call["id"].(string), nil)
		if at.Dig(replayed, "replay", "status") != "SUCCEEDED" || replayed["outputChanged"] != false {
			t.Errorf("the replay of the outsider's request: %s", asJSON(replayed))
		}

		// A policy reading the claims whole keeps every claim.
		env.PutPrincipal("outsiders", []map[string]any{{"effect": "ALLOW", "actions": []any{"*"}, "resources": []any{"*"},
			"assertions": map[string]any{"any": "size(context.auth.claims) > 0"}}})
		reply = env.Post("ledger", idp.token(t, auth.MCPAudience(env.URL), claims), at.Request{Method: "tools/call", Params: map[string]any{"name": "post", "arguments": map[string]any{"key": "d", "amount": 1}}})
		if reply.Status != 200 {
			t.Fatalf("the second call: %s", reply)
		}
		whole, _ := at.Dig(env.Execution(last(t, requests(env, serverID, "tools/call"))["id"].(string)), "invocation", "claims").(map[string]any)
		if whole["email"] != "ada@example.com" {
			t.Errorf("a policy reading every claim, recorded %s", asJSON(whole))
		}
	})
}

// The unit beside it: which claims an assertion reads.
func TestClaimsRead(t *testing.T) {
	for _, c := range []struct {
		assertion string
		names     string
		all       bool
	}{
		{"context.auth.claims.sub == 'a'", "sub", false},
		{`context.auth.claims["department"] == 'x' && has(context.auth.claims.team)`, "department,team", false},
		{"context.document.kind == 'tool'", "", false},
		{"'ops' in context.auth.claims.groups", "groups", false},
		{"size(context.auth.claims) > 0", "", true},
		{"context.auth.claims.exists(k, k == 'x')", "", true},
		{`context.auth.claims[context.document.name] == 1`, "", true},
		{"context.auth.sub == 'x'", "", true},
		{"size(context) > 0", "", true},
		{"(((", "", true},
	} {
		names, all := policy.ClaimsRead([]policy.Policy{{Effect: policy.Allow, Actions: []string{"*"}, Resources: []string{"*"}, Assertions: map[string]string{"a": c.assertion}}})
		var got []string
		for name := range names {
			got = append(got, name)
		}
		slices.Sort(got)
		if all != c.all || (!all && strings.Join(got, ",") != c.names) {
			t.Errorf("%s: %v all %v, want %q all %v", c.assertion, got, all, c.names, c.all)
		}
	}
}
