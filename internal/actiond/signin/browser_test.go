package signin_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// callback is the host's loopback listener for the redirect.
type callback struct {
	server *httptest.Server
	codes  chan url.Values
}

func newCallback(t *testing.T) *callback {
	c := &callback{codes: make(chan url.Values, 1)}
	c.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r) // the browser asks for a favicon too
			return
		}
		c.codes <- r.URL.Query()
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<title>Signed in</title><p id=done>You may close this window.</p>"))
	}))
	t.Cleanup(c.server.Close)
	return c
}

// In a real browser: the consent page shows who asks and where the code
// goes, the person names the subject and approves, the browser is sent to
// the host's loopback redirect with a code the host exchanges; a form
// another site posts to the page is refused, since the browser sends the
// page's SameSite=Strict cookie only from the page itself.
func TestConsentInChromium(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	cb := newCallback(t)
	redirect := cb.server.URL + "/callback"
	h := newHost(t, env.URL, map[string]any{"client_name": "Browser host", "redirect_uris": []string{redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none"})
	h.redirect = redirect
	ctx := at.Chromium(t)

	if err := chromedp.Do(ctx, chromedp.Navigate(h.authorizeURL(nil)), chromedp.WaitVisible(chromedp.ID("approve"))); err != nil {
		t.Fatal(err)
	}
	client, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("client")))
	if err != nil {
		t.Fatal(err)
	}
	shownRedirect, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("redirect")))
	if err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx,
		chromedp.Clear(chromedp.ID("subject")),
		chromedp.SendKeys(chromedp.ID("subject"), "grace"),
		chromedp.Click(chromedp.ID("approve")),
	)
	if err != nil {
		t.Fatal(err)
	}
	if client != "Browser host" || shownRedirect != cb.server.URL {
		t.Fatalf("the page shows client %q and redirect %q", client, shownRedirect)
	}
	var params url.Values
	select {
	case params = <-cb.codes:
	case <-time.After(20 * time.Second):
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("the browser never reached the host's redirect URI; it shows %s", shown)
	}
	if params.Get("state") != "state-123" || params.Get("code") == "" {
		t.Fatalf("redirect parameters %v", params)
	}
	status, tokens := h.exchange(params.Get("code"))
	if status != http.StatusOK {
		t.Fatalf("exchange: %d %v", status, tokens)
	}
	if reply := call(t, env, str(tokens["access_token"])); reply.Status != http.StatusOK {
		t.Fatalf("a call with the token: %s", reply)
	}
	records := env.ExecutionsWhere(map[string]any{"actionId": "00000000-0000-4000-8000-000000000001"})
	if last := records[len(records)-1]; last["subject"] != "grace" {
		t.Fatalf("recorded subject %v", last["subject"])
	}

	// Another site (localhost is another site than 127.0.0.1) posts the
	// consent form with every field the page had but the cookie.
	p := h.open(h.authorizeURL(nil))
	var form strings.Builder
	form.WriteString(`<form id=f method=post action="` + env.URL + `/oauth/authorize">`)
	for name, values := range p.form {
		form.WriteString(`<input type=hidden name="` + name + `" value="` + strings.ReplaceAll(values[0], `"`, "&quot;") + `">`)
	}
	form.WriteString(`<input type=hidden name=subject value=mallory><input type=hidden name=decision value=approve></form><script>document.getElementById("f").submit()</script>`)
	attacker := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(form.String()))
	}))
	listener, err := net.Listen("tcp", "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	attacker.Listener.Close()
	attacker.Listener = listener
	attacker.Start()
	t.Cleanup(attacker.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(strings.Replace(attacker.URL, "127.0.0.1", "localhost", 1)), chromedp.WaitVisible(chromedp.ID("problem"))); err != nil {
		t.Fatal(err)
	}
	problem, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("problem")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(problem, "was not sent from this sign-in page") {
		t.Fatalf("the cross-site form got %q", problem)
	}
	select {
	case params := <-cb.codes:
		t.Fatalf("a cross-site form got a code: %v", params)
	default:
	}
}
