package signin_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// Registration is for MCP hosts, not for web pages, and cannot fill the
// table: a cross-origin text/plain POST (which a page may send without a
// preflight) is refused and registers nothing; registrations are capped
// per hour (429 with Retry-After) and in total; a client nobody ever signed
// in with is pruned once it is older than the unused period, and one that
// was signed in with stays.
func TestRegistrationIsBounded(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		fake := clock.NewFake(at.Start)
		env := at.New(t, d, at.Options{Clock: fake, SignIn: server.SignIn{DefaultSubject: "operator",
			Clients: store.ClientLimits{PerHour: 3, Total: 5, Unused: 24 * time.Hour}}})
		db := env.OpenDatabase()
		clients := func() int {
			t.Helper()
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM oauth_clients").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		register := func(contentType, origin string) (int, http.Header, map[string]any) {
			t.Helper()
			req, _ := http.NewRequest(http.MethodPost, env.URL+"/oauth/register",
				strings.NewReader(`{"redirect_uris":["http://127.0.0.1:33418/callback"],"token_endpoint_auth_method":"none"}`))
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			if origin != "" {
				req.Header.Set("Origin", origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			status, body := readJSON(t, resp)
			return status, resp.Header, body
		}

		for _, contentType := range []string{"text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
			if status, _, body := register(contentType, "http://attacker.example"); status != http.StatusUnsupportedMediaType || body["error"] != "invalid_client_metadata" {
				t.Errorf("a registration sent as %q: %d %v", contentType, status, body)
			}
		}
		if n := clients(); n != 0 {
			t.Fatalf("refused registrations left %d clients", n)
		}

		// One client signs in; two more register in the same hour.
		used := newHost(t, env.URL, nil)
		if code := used.approve("operator").Get("code"); code == "" {
			t.Fatal("no code")
		}
		newHost(t, env.URL, nil)
		newHost(t, env.URL, nil)
		status, header, body := register("application/json", "")
		retry, _ := strconv.Atoi(header.Get("Retry-After"))
		if status != http.StatusTooManyRequests || body["error"] != "temporarily_unavailable" || retry < 1 || retry > 3600 ||
			!strings.Contains(body["error_description"].(string), "in the last hour") {
			t.Fatalf("the hour's fourth registration: %d Retry-After %q %v", status, header.Get("Retry-After"), body)
		}
		fake.Advance(time.Hour + time.Second)
		newHost(t, env.URL, nil)
		newHost(t, env.URL, nil)
		status, header, body = register("application/json", "")
		if status != http.StatusTooManyRequests || header.Get("Retry-After") != "" || !strings.Contains(body["error_description"].(string), "5 clients are registered") {
			t.Fatalf("the sixth client: %d Retry-After %q %v", status, header.Get("Retry-After"), body)
		}
		if n := clients(); n != 5 {
			t.Fatalf("%d clients, want the cap of 5", n)
		}

		// A day later the four never used are forgotten; the one signed in
		// with is kept, and still signs in.
		fake.Advance(24*time.Hour + time.Hour)
		newHost(t, env.URL, nil)
		if n := clients(); n != 2 {
			t.Errorf("after the unused were pruned: %d clients, want 2", n)
		}
		if p := used.open(used.authorizeURL(nil)); p.status != http.StatusOK {
			t.Errorf("the client signed in with was pruned: %d %s", p.status, p.body)
		}
	})
}
