package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// loopbackServer runs the whole server on a loopback listener, as `actiond
// serve` does by default, allowing the pages of corsOrigins.
func loopbackServer(t *testing.T, corsOrigins ...string) (string, *server.Server) {
	t.Helper()
	return loopbackServerWith(t, func(o *server.Options) { o.CORSOrigins = corsOrigins })
}

// loopbackServerWith is loopbackServer with options of the test's own.
func loopbackServerWith(t *testing.T, configure func(*server.Options)) (string, *server.Server) {
	t.Helper()
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + listener.Addr().String()
	opts := server.Options{Store: storetest.Options(t, store.SQLite), PublicURL: url, Listen: listener.Addr().String()}
	configure(&opts)
	srv, err := server.New(context.Background(), opts)
	if err != nil {
		listener.Close()
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	ts.Listener.Close()
	ts.Listener = listener
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return url, srv
}

// asked is one request of the matrix: what it sent and what came back.
type asked struct {
	status int
	body   string
}

// send makes one request to base+path with the given Host, Origin and
// bearer token ("" for none).
func send(t *testing.T, base, method, path, host, origin, token, contentType, body string) asked {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return asked{status: resp.StatusCode, body: string(raw)}
}

func graphQLBody(query string) string {
	b, _ := json.Marshal(map[string]any{"query": query})
	return string(b)
}

// The local root, unauthenticated GraphQL with every permission, answers
// only a request from this machine under a loopback Host with the served
// port and no foreign Origin. The matrix of Host, Origin and token is sent
// to every route: a Host that is not a loopback name (DNS rebinding) is
// refused on every one of them, token or not; a loopback Host with another
// port, or a foreign Origin, is unauthenticated, so GraphQL answers 401
// without a token and neither reads nor writes (putPrincipal), and answers
// as the token's principal with one.
func TestLocalRootOnlyForThisMachine(t *testing.T) {
	base, srv := loopbackServer(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	served, _ := strconv.Atoi(port)
	other := strconv.Itoa(served + 1)
	graphQLToken, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana", Audience: auth.GraphQLAudience(base)})
	if err != nil {
		t.Fatal(err)
	}
	mcpToken, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana"})
	if err != nil {
		t.Fatal(err)
	}

	type host struct {
		name string
		// served: a loopback name with the served port; rebound: not a
		// loopback name at all.
		served, rebound bool
	}
	hosts := []host{
		{"127.0.0.1:" + port, true, false},
		{"localhost:" + port, true, false},
		{"[::1]:" + port, true, false},
		{"127.0.0.1:" + other, false, false},
		{"localhost", false, false},
		{"rebind.attacker.example:" + port, false, true},
		{"rebind.attacker.example", false, true},
		{"127.0.0.1.nip.io:" + port, false, true},
	}
	type origin struct {
		value   string
		foreign bool
	}
	origins := []origin{
		{"", false},
		{"http://127.0.0.1:" + port, false},
		{"http://localhost:" + port, false},
		{"http://rebind.attacker.example:" + port, true},
		{"http://attacker.example", true},
		{"http://127.0.0.1:" + other, true},
		{"https://127.0.0.1:" + port, true},
		{"null", true},
	}
	putPrincipal := func(name string) string {
		return graphQLBody(`mutation { auth { putPrincipal(input: {name: "` + name + `", policies: [{effect: ALLOW, actions: ["*"], resources: ["*"]}]}) { name } } }`)
	}
	readRoot := graphQLBody(`{ auth { principals { name } } }`)
	n := 0
	for _, h := range hosts {
		for _, o := range origins {
			for _, withToken := range []bool{false, true} {
				n++
				what := fmt.Sprintf("Host %q, Origin %q, token %v", h.name, o.value, withToken)
				token, mcp := "", ""
				if withToken {
					token, mcp = graphQLToken, mcpToken
				}
				root := h.served && !o.foreign && !withToken
				name := fmt.Sprintf("intruder-%d", n)

				// GraphQL: read and write.
				read := send(t, base, http.MethodPost, "/financial/v1/graphql", h.name, o.value, token, "application/json", readRoot)
				write := send(t, base, http.MethodPost, "/financial/v1/graphql", h.name, o.value, token, "application/json", putPrincipal(name))
				switch {
				case h.rebound:
					if read.status != http.StatusForbidden || write.status != http.StatusForbidden || strings.Contains(read.body, `"data"`) {
						t.Errorf("%s: GraphQL answered %d %s / %d %s", what, read.status, read.body, write.status, write.body)
					}
				case root, withToken:
					if read.status != http.StatusOK || !strings.Contains(read.body, `"name":"`+server.LocalPrincipal+`"`) || write.status != http.StatusOK {
						t.Errorf("%s: GraphQL as %v answered %d %s / %d %s", what, map[bool]string{true: "the root", false: "the token"}[root], read.status, read.body, write.status, write.body)
					}
				default:
					if read.status != http.StatusUnauthorized || write.status != http.StatusUnauthorized || strings.Contains(read.body, `"data":{`) {
						t.Errorf("%s: unauthenticated GraphQL answered %d %s / %d %s", what, read.status, read.body, write.status, write.body)
					}
				}
				written := strings.Contains(check(t, base, `{ auth { principal(name: "`+name+`") { name } } }`), name)
				if wantWritten := !h.rebound && (root || withToken); written != wantWritten {
					t.Errorf("%s: putPrincipal wrote %v, want %v", what, written, wantWritten)
				}

				// The explorer, the health check, the metadata, the MCP
				// endpoint and the sign-in's registration.
				for _, route := range []struct{ method, path, contentType, body string }{
					{http.MethodGet, "/explorer/", "", ""},
					{http.MethodGet, "/healthcheck", "", ""},
					{http.MethodGet, auth.AuthorizationServerMetadataPath, "", ""},
					{http.MethodGet, auth.ProtectedResourcePrefix + "/mcp/v1/000000000000/default", "", ""},
					{http.MethodPost, "/mcp/v1/000000000000/default", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`},
				} {
					bearer := ""
					if strings.HasPrefix(route.path, "/mcp/") {
						bearer = mcp
					}
					got := send(t, base, route.method, route.path, h.name, o.value, bearer, route.contentType, route.body)
					if h.rebound {
						if got.status != http.StatusForbidden {
							t.Errorf("%s: %s answered %d %.200s", what, route.path, got.status, got.body)
						}
						continue
					}
					// An MCP endpoint refuses a page of another site (the
					// Streamable HTTP transport's Origin check); the rest
					// leave it to the browser's CORS.
					refusedOrigin := strings.HasPrefix(route.path, "/mcp/") && o.foreign
					if refusedOrigin != (got.status == http.StatusForbidden) {
						t.Errorf("%s: %s answered %d (403 wanted: %v): %.200s", what, route.path, got.status, refusedOrigin, got.body)
					}
				}
			}
		}
	}
}

// check reads with the local root, as this machine's user would.
func check(t *testing.T, base, query string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/financial/v1/graphql", bytes.NewReader([]byte(graphQLBody(query))))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the local root's read: %d %s", resp.StatusCode, raw)
	}
	return string(raw)
}
