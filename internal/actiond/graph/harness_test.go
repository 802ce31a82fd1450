package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

const publicURL = "http://127.0.0.1:8080"

var start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// api is actiond's GraphQL endpoint on a real HTTP server over a real store,
// with the local issuer accepted at both endpoints' audiences.
type api struct {
	t      *testing.T
	store  *store.Store
	clock  *clock.Fake
	issuer *auth.LocalIssuer
	server *httptest.Server
}

func newAPI(t *testing.T, d store.Dialect) *api {
	t.Helper()
	c := clock.NewFake(start)
	s := storetest.Open(t, d, c)
	issuer, err := auth.NewLocalIssuer(context.Background(), auth.LocalIssuerOptions{URL: publicURL, KeyStore: s, Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.NewVerifier(auth.VerifierOptions{Clock: c, Issuers: []auth.IssuerConfig{
		issuer.IssuerConfig(auth.GraphQLAudience(publicURL), auth.MCPAudience(publicURL)),
	}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(graph.Path, graph.NewHandler(graph.Options{
		Store: s, Verifier: verifier, PublicURL: publicURL, LocalRoot: true, Clock: c, Natives: natives,
	}))
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	return &api{t: t, store: s, clock: c, issuer: issuer, server: server}
}

// natives stands in for the engine's catalogue (the server wires the real
// one): graphql and cel run, the other native tools do not yet.
func natives(name string) (graph.NativeTool, bool) {
	switch name {
	case "graphql", "cel":
		return graph.NativeTool{Description: "The native " + name + " tool.", InputSchema: map[string]any{"type": "object"}}, true
	}
	return graph.NativeTool{}, false
}

// token mints a GraphQL token for principal (aud: the GraphQL endpoint).
func (a *api) token(principal string, accounts ...string) string {
	a.t.Helper()
	token, err := a.issuer.Mint(auth.MintOptions{Principal: principal, Subject: "user-" + principal, Accounts: accounts,
		Audience: auth.GraphQLAudience(publicURL)})
	if err != nil {
		a.t.Fatal(err)
	}
	return token
}

// mcpToken mints a token for the MCP endpoints.
func (a *api) mcpToken(principal string) string {
	a.t.Helper()
	token, err := a.issuer.Mint(auth.MintOptions{Principal: principal, Subject: "user-" + principal})
	if err != nil {
		a.t.Fatal(err)
	}
	return token
}

type gqlError struct {
	Message    string         `json:"message"`
	Path       []any          `json:"path"`
	Extensions map[string]any `json:"extensions"`
}

type result struct {
	t      *testing.T
	Status int
	Data   json.RawMessage `json:"data"`
	Errors []gqlError      `json:"errors"`
	body   string
}

type call struct {
	vars    map[string]any
	token   string
	account string
}

// root runs a request as the local root.
func (a *api) root(query string, vars ...map[string]any) *result {
	a.t.Helper()
	c := call{}
	if len(vars) > 0 {
		c.vars = vars[0]
	}
	return a.do(query, c)
}

// as runs a request with a bearer token.
func (a *api) as(token, query string, vars ...map[string]any) *result {
	a.t.Helper()
	c := call{token: token}
	if len(vars) > 0 {
		c.vars = vars[0]
	}
	return a.do(query, c)
}

func (a *api) do(query string, c call) *result {
	a.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": c.vars})
	if err != nil {
		a.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, a.server.URL+graph.Path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.account != "" {
		req.Header.Set(graph.AccountHeader, c.account)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	r := &result{t: a.t, Status: resp.StatusCode, body: string(raw)}
	if err := json.Unmarshal(raw, r); err != nil {
		a.t.Fatalf("status %d, body %s: %v", resp.StatusCode, raw, err)
	}
	return r
}

// ok fails the test unless the request succeeded, and decodes its data.
func (r *result) ok() map[string]any {
	r.t.Helper()
	if r.Status != http.StatusOK || len(r.Errors) > 0 {
		r.t.Fatalf("request failed: status %d: %s", r.Status, r.body)
	}
	var data map[string]any
	if err := json.Unmarshal(r.Data, &data); err != nil {
		r.t.Fatalf("data %s: %v", r.Data, err)
	}
	return data
}

// fails asserts the request failed with code as its first error's code and
// data null, and returns that error.
func (r *result) fails(code string) gqlError {
	r.t.Helper()
	if len(r.Errors) == 0 {
		r.t.Fatalf("request succeeded, want %s: %s", code, r.body)
	}
	if string(r.Data) != "null" && len(r.Data) != 0 {
		r.t.Fatalf("a failed request has data: %s", r.body)
	}
	e := r.Errors[0]
	if e.Extensions["code"] != code {
		r.t.Fatalf("code %v, want %s: %s", e.Extensions["code"], code, r.body)
	}
	return e
}

// failsOn asserts the failure names field, in extensions.field and in the
// message.
func (r *result) failsOn(code, field string) gqlError {
	r.t.Helper()
	e := r.fails(code)
	if e.Extensions["field"] != field || !strings.Contains(e.Message, field) {
		r.t.Fatalf("field %v (message %q), want %s", e.Extensions["field"], e.Message, field)
	}
	return e
}

// at walks decoded JSON along a path of keys and indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, step := range path {
		switch s := step.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: not an object: %v", step, v)
			}
			v = m[s]
		case int:
			l, ok := v.([]any)
			if !ok || s >= len(l) {
				t.Fatalf("at %v: not a list that long: %v", step, v)
			}
			v = l[s]
		}
	}
	return v
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
