// Package actiondtest starts a real actiond for tests: server.New over a real
// store (SQLite or Postgres, see storetest), served over HTTP on loopback,
// with helpers to mint tokens, define actions through the GraphQL API, read
// records back through it, and connect the go-sdk MCP client at a chosen
// protocol revision.
package actiondtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// Protocol revisions the tests speak.
const (
	Revision2026 = "2026-07-28"
	Revision2025 = "2025-11-25"
)

// Revisions are the revisions every MCP rule is tested at.
var Revisions = []string{Revision2026, Revision2025}

// Account is the account tokens name by default.
const Account = auth.DefaultAccount

// Start is when a fake clock starts.
var Start = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// Options configure Start.
type Options struct {
	// Clock is the server's clock; nil is a real clock.
	Clock clock.Clock
	// Store overrides the fresh database of the dialect, e.g. to share one
	// database between two servers.
	Store *store.Options
	// Log writes the server's log to the test log.
	Log bool
	// SignIn configures the sign-in.
	SignIn server.SignIn
	// PublicURL overrides the public URL (default the listener's).
	PublicURL string
	// Models are the model providers callable agents name (a
	// modeltest.Server's, as Provider gives it). The environment adds
	// none: tests never see the machine's provider variables.
	Models []agent.Provider
	// Tasks configure the task workers.
	Tasks server.TaskOptions
	// Issuers are token issuers besides the local one (an outside
	// identity provider), given the public URL their audiences name.
	Issuers func(publicURL string) []auth.IssuerConfig
	// Metrics serves GET /metrics (server.Options.Metrics).
	Metrics bool
	// CORSOrigins are the origins whose pages may call the MCP endpoints
	// and the sign-in's endpoints (server.Options.CORSOrigins).
	CORSOrigins []string
	// Env is the whole environment the server reads (the OTEL_* settings
	// of tracing); the machine's own never reaches it.
	Env map[string]string
}

// Env is one running actiond.
type Env struct {
	T       testing.TB
	Dialect store.Dialect
	Server  *server.Server
	// URL is the public URL, http://127.0.0.1:<port>.
	URL   string
	Clock clock.Clock
	// StoreOptions open the same database again.
	StoreOptions store.Options
	HTTP         *httptest.Server
	// minter mints tokens when there is no in-process Server.
	minter func(auth.MintOptions) (string, error)
}

// New starts actiond on a fresh database of the dialect, on loopback.
func New(t testing.TB, d store.Dialect, opts Options) *Env {
	t.Helper()
	var storeOptions store.Options
	if opts.Store != nil {
		storeOptions = *opts.Store
	} else {
		storeOptions = storetest.Options(t, d)
	}
	ts := httptest.NewUnstartedServer(nil)
	addr := ts.Listener.Addr().String()
	public := "http://" + addr
	if opts.PublicURL != "" {
		public = opts.PublicURL
	}
	var issuers []auth.IssuerConfig
	if opts.Issuers != nil {
		issuers = opts.Issuers(public)
	}
	logger := slog.New(slog.DiscardHandler)
	if opts.Log {
		logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	srv, err := server.New(context.Background(), server.Options{
		Store: storeOptions, PublicURL: public, Listen: addr, Clock: opts.Clock, Logger: logger, SignIn: opts.SignIn,
		Models: opts.Models, Getenv: func(key string) string { return opts.Env[key] }, Tasks: opts.Tasks, Issuers: issuers,
		Metrics: opts.Metrics, CORSOrigins: opts.CORSOrigins,
	})
	if err != nil {
		ts.Close()
		t.Fatalf("start actiond: %v", err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	c := opts.Clock
	if c == nil {
		c = clock.Real{}
	}
	return &Env{T: t, Dialect: d, Server: srv, URL: public, Clock: c, StoreOptions: storeOptions, HTTP: ts}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Endpoint is an MCP server's endpoint in the default account.
func (e *Env) Endpoint(name string) string { return e.URL + "/mcp/v1/" + Account + "/" + name }

// Token mints an MCP token for principal and subject in the default account.
func (e *Env) Token(principal, subject string) string {
	e.T.Helper()
	return e.MintToken(auth.MintOptions{Principal: principal, Subject: subject, Client: "client-" + subject})
}

// GraphQLToken mints a GraphQL API token for principal and subject.
func (e *Env) GraphQLToken(principal, subject string) string {
	e.T.Helper()
	return e.MintToken(auth.MintOptions{Principal: principal, Subject: subject, Audience: auth.GraphQLAudience(e.URL)})
}

// MintToken mints a token with the local issuer.
func (e *Env) MintToken(opts auth.MintOptions) string {
	e.T.Helper()
	mint := e.minter
	if e.Server != nil {
		mint = e.Server.Issuer.Mint
	}
	token, err := mint(opts)
	if err != nil {
		e.T.Fatalf("mint token: %v", err)
	}
	return token
}

// GraphQLError is one error of a GraphQL response.
type GraphQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions"`
}

// GraphQLResponse is a GraphQL response.
type GraphQLResponse struct {
	Data   json.RawMessage `json:"data"`
	Errors []GraphQLError  `json:"errors"`
}

// GraphQL runs a request as the local root (no token, from loopback).
func (e *Env) GraphQL(query string, variables map[string]any) GraphQLResponse {
	e.T.Helper()
	return e.GraphQLAs("", query, variables)
}

// GraphQLAs runs a request as a principal: token is a GraphQL token
// (GraphQLToken); "" runs it as the local root.
func (e *Env) GraphQLAs(token, query string, variables map[string]any) GraphQLResponse {
	e.T.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/financial/v1/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatalf("graphql: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatalf("graphql: %v", err)
	}
	var out GraphQLResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		e.T.Fatalf("graphql: HTTP %d: %s", resp.StatusCode, raw)
	}
	return out
}

// MustGraphQL runs a request that must succeed and decodes its data into a
// JSON-shaped value.
func (e *Env) MustGraphQL(query string, variables map[string]any) map[string]any {
	e.T.Helper()
	resp := e.GraphQL(query, variables)
	if len(resp.Errors) > 0 {
		e.T.Fatalf("graphql %s: %+v", firstLine(query), resp.Errors)
	}
	var data map[string]any
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		e.T.Fatalf("graphql data: %v", err)
	}
	return data
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i > 0 {
		return s[:i]
	}
	return s
}

// CreateAction creates an action and returns its version (1).
func (e *Env) CreateAction(id string, input map[string]any) int {
	e.T.Helper()
	data := e.MustGraphQL(`mutation($id: ID!, $input: ActionInput!) { actions { createAction(id: $id, input: $input) { version } } }`,
		map[string]any{"id": id, "input": input})
	return int(Dig(data, "actions", "createAction", "version").(float64))
}

// UpdateAction writes a new version and returns it.
func (e *Env) UpdateAction(id string, input map[string]any) int {
	e.T.Helper()
	data := e.MustGraphQL(`mutation($id: ID!, $input: ActionUpdateInput!) { actions { updateAction(id: $id, input: $input) { version } } }`,
		map[string]any{"id": id, "input": input})
	return int(Dig(data, "actions", "updateAction", "version").(float64))
}

// DeleteAction deletes an action.
func (e *Env) DeleteAction(id string) {
	e.T.Helper()
	e.MustGraphQL(`mutation($id: ID!) { actions { deleteAction(id: $id) { id } } }`, map[string]any{"id": id})
}

// PutPrincipal creates a principal or replaces its policies.
func (e *Env) PutPrincipal(name string, policies []map[string]any) {
	e.T.Helper()
	e.MustGraphQL(`mutation($input: PrincipalInput!) { auth { putPrincipal(input: $input) { name } } }`,
		map[string]any{"input": map[string]any{"name": name, "policies": policies}})
}

// CloseSession closes a session of a server.
func (e *Env) CloseSession(serverID, sessionID string) {
	e.T.Helper()
	e.MustGraphQL(`mutation($a: ID!, $s: String!) { actions { closeSession(actionId: $a, sessionId: $s) { closed } } }`,
		map[string]any{"a": serverID, "s": sessionID})
}

// ExecutionFields are the fields Executions and Execution read.
const ExecutionFields = `id actionId actionVersion actionName eventType role status caller subject client input output error
	invocation preview grantedInPreview sessionId parentId startedBy { executionId notStarted } cancelledBy { principal subject executionId } rolledBackByExecutionId startedAt endedAt
	writeSet { table key value deleted } writeSetUnreadable uses { kind executionId }
	mcpRequest { method params id principal subject client protocolVersion intent }
	calls { id actionId actionVersion actionName status input output error preview grantedInPreview parentId rolledBackByExecutionId
		writeSet { table key value deleted } calls { id actionName status input output error preview rolledBackByExecutionId writeSet { table key value } } }`

// Executions lists an action's executions (the requests of a server, its
// refusals included), oldest first.
func (e *Env) Executions(actionID string) []map[string]any {
	e.T.Helper()
	return e.ExecutionsWhere(map[string]any{"actionId": actionID})
}

// ExecutionsWhere lists executions matching an ExecutionWhere, oldest first.
func (e *Env) ExecutionsWhere(where map[string]any) []map[string]any {
	e.T.Helper()
	var out []map[string]any
	var after any
	for {
		data := e.MustGraphQL(`query($w: ExecutionWhere, $after: String) { actions { executions(where: $w, first: 100, after: $after) {
			edges { node { `+ExecutionFields+` } } pageInfo { hasNextPage endCursor } } } }`,
			map[string]any{"w": where, "after": after})
		conn := Dig(data, "actions", "executions").(map[string]any)
		for _, edge := range conn["edges"].([]any) {
			out = append(out, edge.(map[string]any)["node"].(map[string]any))
		}
		page := conn["pageInfo"].(map[string]any)
		if page["hasNextPage"] != true {
			return out
		}
		after = page["endCursor"]
	}
}

// Execution reads one execution; nil when there is none.
func (e *Env) Execution(id string) map[string]any {
	e.T.Helper()
	data := e.MustGraphQL(`query($id: ID!) { execution(id: $id) { `+ExecutionFields+` } }`, map[string]any{"id": id})
	node, _ := data["execution"].(map[string]any)
	return node
}

// Session reads a session with its inputs; nil when there is none.
func (e *Env) Session(serverID, sessionID string) map[string]any {
	e.T.Helper()
	data := e.MustGraphQL(`query($a: ID!, $s: String!) { actions { session(actionId: $a, sessionId: $s) {
		id input closed inputs { seq type executionId state calls admittedAt } } } }`, map[string]any{"a": serverID, "s": sessionID})
	node, _ := Dig(data, "actions", "session").(map[string]any)
	return node
}

// KV reads a KV value through GraphQL; nil when absent.
func (e *Env) KV(namespace, key string) any {
	e.T.Helper()
	data := e.MustGraphQL(`query($n: String!, $k: String!) { kv { value(namespace: $n, key: $k) { value } } }`,
		map[string]any{"n": namespace, "k": key})
	node, _ := Dig(data, "kv", "value").(map[string]any)
	if node == nil {
		return nil
	}
	return node["value"]
}

// Dig walks a decoded JSON value by object keys; nil when a step is missing.
func Dig(v any, path ...string) any {
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
	}
	return v
}

// Decode decodes a JSON value held as a string or raw JSON into a value.
func Decode(v any) any {
	switch s := v.(type) {
	case string:
		var out any
		if json.Unmarshal([]byte(s), &out) == nil {
			return out
		}
	}
	return v
}

// HTTPClient is an HTTP client that sends a bearer token with every request.
func HTTPClient(token string) *http.Client {
	return &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}, Timeout: 2 * time.Minute}
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// Connect connects the go-sdk client to a server at a revision with a
// bearer token. The session is closed at the end of the test.
func (e *Env) Connect(name, token, revision string) *mcp.ClientSession {
	e.T.Helper()
	session, err := e.TryConnect(name, token, revision, nil)
	if err != nil {
		e.T.Fatalf("connect to %s at %s: %v", name, revision, err)
	}
	return session
}

// TryConnect connects like Connect, with client options, and returns the
// error instead of failing.
func (e *Env) TryConnect(name, token, revision string, options *mcp.ClientOptions) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "actiondtest", Version: "1"}, options)
	transport := &mcp.StreamableClientTransport{Endpoint: e.Endpoint(name), HTTPClient: HTTPClient(token), MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		return nil, err
	}
	e.T.Cleanup(func() { session.Close() })
	return session, nil
}

// Reply is a raw HTTP answer of the MCP endpoint.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
	// RPC is the body decoded as a JSON-RPC response (nil when it is not).
	RPC map[string]any
}

// ErrorCode is error.code, 0 when there is none.
func (r Reply) ErrorCode() int {
	code, _ := Dig(r.RPC, "error", "code").(float64)
	return int(code)
}

// DataCode is error.data.code.
func (r Reply) DataCode() string {
	code, _ := Dig(r.RPC, "error", "data", "code").(string)
	return code
}

// Result is the JSON-RPC result.
func (r Reply) Result() map[string]any {
	res, _ := Dig(r.RPC, "result").(map[string]any)
	return res
}

func (r Reply) String() string { return fmt.Sprintf("HTTP %d %s", r.Status, r.Body) }

// Request is one JSON-RPC request to send raw.
type Request struct {
	Method string
	ID     any // nil: 1
	Params map[string]any
	// Revision sets the protocol headers and _meta: 2026-07-28 (default)
	// puts version, clientInfo and capabilities in _meta and Mcp-Method /
	// Mcp-Name headers; an older one sends only Mcp-Protocol-Version.
	Revision string
	// Capabilities are the client capabilities (2026-07-28).
	Capabilities map[string]any
	// NoClientInfo leaves clientInfo out.
	NoClientInfo bool
	// Header adds or overrides headers.
	Header map[string]string
}

// Body is the request's JSON body and headers.
func (q Request) Body() ([]byte, http.Header) {
	revision := q.Revision
	if revision == "" {
		revision = Revision2026
	}
	params := map[string]any{}
	for k, v := range q.Params {
		params[k] = v
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json, text/event-stream")
	header.Set("Mcp-Protocol-Version", revision)
	if revision >= Revision2026 {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["io.modelcontextprotocol/protocolVersion"] = revision
		caps := q.Capabilities
		if caps == nil {
			caps = map[string]any{}
		}
		meta["io.modelcontextprotocol/clientCapabilities"] = caps
		if !q.NoClientInfo {
			meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "raw", "version": "1"}
		}
		params["_meta"] = meta
		header.Set("Mcp-Method", q.Method)
		switch q.Method {
		case "tools/call", "prompts/get":
			name, _ := params["name"].(string)
			header.Set("Mcp-Name", name)
		case "resources/read":
			uri, _ := params["uri"].(string)
			header.Set("Mcp-Name", uri)
		case "tasks/get", "tasks/update", "tasks/cancel":
			id, _ := params["taskId"].(string)
			header.Set("Mcp-Name", id)
		}
	}
	for k, v := range q.Header {
		header.Set(k, v)
	}
	id := q.ID
	if id == nil {
		id = 1
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": q.Method, "params": params})
	return body, header
}

// Post sends a raw request to a server's endpoint with a token ("" sends
// none).
func (e *Env) Post(name, token string, q Request) Reply {
	e.T.Helper()
	body, header := q.Body()
	return e.PostBody(name, token, body, header)
}

// PostBody sends a raw body.
func (e *Env) PostBody(name, token string, body []byte, header http.Header) Reply {
	e.T.Helper()
	reply, err := PostBody(context.Background(), http.DefaultClient, e.Endpoint(name), token, body, header)
	if err != nil {
		e.T.Fatalf("post to %s: %v", name, err)
	}
	return reply
}

// PostBody sends a raw body to an endpoint URL.
func PostBody(ctx context.Context, client *http.Client, url, token string, body []byte, header http.Header) (Reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	reply := Reply{Status: resp.StatusCode, Header: resp.Header, Body: raw}
	var rpc map[string]any
	if json.Unmarshal(raw, &rpc) == nil {
		reply.RPC = rpc
	}
	return reply, nil
}
