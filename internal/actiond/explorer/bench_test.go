package explorer_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// sessionRequests is how long the benchmark's session is.
const sessionRequests = 10_000

// BenchmarkSessionFirstRender measures the time from navigating to a
// session's timeline to its first page rendered, for a session of 10,000
// requests made through the real endpoint, and what the page transferred.
// The baseline beside it is the GraphQL request for that first page alone,
// as any client would send it: the page's own cost is the difference.
//
//	go test ./internal/actiond/explorer -run '^$' -bench SessionFirstRender -benchtime 20x
func BenchmarkSessionFirstRender(b *testing.B) {
	f := newFixture(b)
	token := f.env.Token(principal, "alice")
	seedSession(b, f, token, sessionRequests)
	fragment := "/session/" + f.serverID + "/" + f.session("alice")

	b.Run("baseline=graphql-first-page", func(b *testing.B) {
		vars := map[string]any{"actionId": f.serverID, "sessionId": f.session("alice"), "where": map[string]any{}, "last": 100}
		query := firstPageQuery(b, f)
		b.ResetTimer()
		for range b.N {
			var out struct {
				Errors []any `json:"errors"`
			}
			postGraphQL(b, f.env.URL, "", query, vars, &out)
			if len(out.Errors) > 0 {
				b.Fatalf("first page: %v", out.Errors)
			}
		}
	})

	b.Run("explorer-first-render", func(b *testing.B) {
		browser := newBrowser(b, laptopWidth, laptopHeight)
		browser.resetTransferred()
		browser.open(f.page(fragment), "session")
		page, api := browser.bytesFrom(f.env.URL+"/explorer/"), browser.bytesFrom(f.env.URL+"/financial/")
		if rows := eval[int](browser, `document.querySelectorAll("#timeline li.entry").length`); rows != 100 {
			b.Fatalf("the first page shows %d requests, want 100", rows)
		}
		var total float64
		b.ResetTimer()
		for range b.N {
			browser.do(chromedp.Navigate("about:blank"))
			browser.open(f.page(fragment), "session")
			ms, err := strconv.ParseFloat(eval[string](browser, `document.documentElement.dataset.readyAt`), 64)
			if err != nil {
				b.Fatal(err)
			}
			total += ms
		}
		b.ReportMetric(total/float64(b.N), "ms/first-render")
		b.ReportMetric(page, "page-bytes")
		b.ReportMetric(api, "graphql-bytes")
	})
}

// firstPageQuery is the query the page sends for a session's first page,
// read from the page itself so that the baseline asks the same.
func firstPageQuery(b *testing.B, f *fixture) string {
	browser := newBrowser(b, laptopWidth, laptopHeight)
	browser.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	browser.click("#copy-graphql")
	browser.waitFor("the dialog", `document.getElementById("graphql-text")`, 10*time.Second)
	ops := splitOperations(b, eval[string](browser, `document.getElementById("graphql-text").value`))
	return ops[0].query
}

// seedSession makes n tools/call requests in alice's session through the
// endpoint, four hosts' worth at a time: the session admits them one after
// another, as it would a busy agent's.
func seedSession(b testing.TB, f *fixture, token string, n int) {
	b.Helper()
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	per := n / 4
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: time.Minute}
			for i := range per {
				body, header := at.Request{Method: "tools/call", Params: map[string]any{"name": "lookup",
					"arguments": map[string]any{"account_id": fmt.Sprintf("acct-%d-%d", w, i), "intent": fmt.Sprintf("Check account %d of batch %d.", i, w)}}}.Body()
				reply, err := at.PostBody(b.Context(), client, f.env.Endpoint("fraud-ops"), token, body, header)
				if err == nil && reply.Status != http.StatusOK {
					err = fmt.Errorf("tools/call: %s", reply)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.Logf("seeded %d requests in %s", n, time.Since(began).Round(time.Millisecond))
}
