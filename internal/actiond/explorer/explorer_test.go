package explorer_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/explorer"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// The page comes from actiond itself, every file embedded, under a strict
// Content-Security-Policy, compressed when the browser accepts it, and
// references nothing outside its own origin.
func TestServesTheEmbeddedPageUnderAStrictPolicy(t *testing.T) {
	env := at.New(t, store.SQLite, at.Options{})
	get := func(path string, header map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, env.URL+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		// The transport would ask for gzip and undo it on its own.
		resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	index := get("/explorer/", nil)
	body, _ := io.ReadAll(index.Body)
	if index.StatusCode != http.StatusOK || !strings.HasPrefix(index.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /explorer/: %d %s", index.StatusCode, index.Header.Get("Content-Type"))
	}
	for header, want := range map[string]string{
		"Content-Security-Policy": explorer.ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
	} {
		if got := index.Header.Get(header); got != want {
			t.Errorf("%s: %q, want %q", header, got, want)
		}
	}
	for _, directive := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "trusted-types 'none'"} {
		if !strings.Contains(explorer.ContentSecurityPolicy, directive) {
			t.Errorf("the policy lacks %s", directive)
		}
	}
	if strings.Contains(explorer.ContentSecurityPolicy, "unsafe") {
		t.Errorf("the policy allows something unsafe: %s", explorer.ContentSecurityPolicy)
	}
	// Everything the page loads is its own.
	refs := regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(string(body), -1)
	for _, ref := range refs {
		if strings.Contains(ref[1], "//") {
			t.Errorf("the page loads %s from elsewhere", ref[1])
		}
		if ref[1] != "data:," && get("/explorer/"+ref[1], nil).StatusCode != http.StatusOK {
			t.Errorf("the page's %s is not served", ref[1])
		}
	}
	packed := get("/explorer/app.js", map[string]string{"Accept-Encoding": "gzip, br"})
	if packed.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("app.js is not compressed for a browser that accepts gzip")
	}
	zr, err := gzip.NewReader(packed.Body)
	if err != nil {
		t.Fatal(err)
	}
	script, _ := io.ReadAll(zr)
	if !bytes.Contains(script, []byte("hashchange")) {
		t.Fatalf("app.js unpacks to something else: %.80s", script)
	}
	if again := get("/explorer/app.js", map[string]string{"If-None-Match": packed.Header.Get("ETag")}); again.StatusCode != http.StatusNotModified {
		t.Errorf("an unchanged file is sent again: %d", again.StatusCode)
	}
	if missing := get("/explorer/nope.js", nil); missing.StatusCode != http.StatusNotFound {
		t.Errorf("a file the page does not have: %d", missing.StatusCode)
	}
	resp, err := http.Post(env.URL+"/explorer/", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /explorer/: %d", resp.StatusCode)
	}
}

type timelineEntry struct {
	Execution string `json:"execution"`
	Tool      string `json:"tool"`
	Status    string `json:"status"`
	Intent    string `json:"intent"`
	Method    string `json:"method"`
	Preview   bool   `json:"preview"`
}

const readTimeline = `[...document.querySelectorAll("#timeline li.entry")].map((li) => ({
	execution: li.dataset.execution, tool: li.dataset.tool, status: li.dataset.status, preview: li.classList.contains("is-preview"),
	method: li.querySelector(".method").textContent, intent: li.querySelector(".said").textContent}))`

// ACT-290: a session's timeline shows the requests an MCP client just made,
// newest first, each with its method, tool, the intent it stated and the
// preview marker, as GraphQL records them; while the session is open, a
// new request appears without a reload.
func TestTimelineShowsTheRequestsJustMadeWithTheirIntents_ACT290(t *testing.T) {
	f := newFixture(t)
	alice := f.connect("alice")
	call(t, alice, "lookup", map[string]any{"account_id": "a1", "intent": "Check a1 before the weekly review."})
	call(t, alice, "note", map[string]any{"account_id": "a1", "text": "flag for review", "intent": "Leave the ops team a note on a1."})

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	entries := eval[[]timelineEntry](b, readTimeline)
	records := f.requests("alice")
	if len(entries) != len(records) {
		t.Fatalf("the timeline shows %d requests, GraphQL records %d: %s", len(entries), len(records), at.AsJSON(entries))
	}
	for i, e := range entries {
		r := records[len(records)-1-i]
		intent, _ := at.Dig(r, "mcpRequest", "intent").(string)
		if intent != "" {
			intent = "\u201c" + intent + "\u201d"
		}
		if e.Execution != r["id"] || e.Method != at.Dig(r, "mcpRequest", "method") || e.Intent != intent || e.Status != r["status"] || !e.Preview {
			t.Errorf("entry %d: %s, recorded %s", i, at.AsJSON(e), at.AsJSON(r["mcpRequest"]))
		}
	}
	if entries[0].Tool != "note" || entries[0].Intent != "\u201cLeave the ops team a note on a1.\u201d" || entries[1].Tool != "lookup" {
		t.Fatalf("the newest requests are not the two calls: %s", at.AsJSON(entries[:2]))
	}
	b.screenshot("session-timeline")

	call(t, alice, "lookup", map[string]any{"account_id": "a2", "intent": "Compare with a2."})
	b.waitFor("the new request to appear", `document.querySelector("#timeline li.entry .said").textContent.includes("Compare with a2.")`, 15*time.Second)
	if n := eval[string](b, `document.getElementById("request-count").textContent`); n != "4" && n != "3" && n != "5" {
		t.Errorf("the session's count reads %q", n)
	}
	if got, want := len(eval[[]timelineEntry](b, readTimeline)), len(f.requests("alice")); got != want {
		t.Errorf("after the live update the timeline shows %d requests, GraphQL records %d", got, want)
	}

	// A filter is part of the link, and goes to the API.
	b.visit("/session/"+f.serverID+"/"+f.session("alice")+"?tool=note", "session")
	filtered := eval[[]timelineEntry](b, readTimeline)
	if len(filtered) != 1 || filtered[0].Tool != "note" {
		t.Errorf("filtered by tool note: %s", at.AsJSON(filtered))
	}
	if v := eval[string](b, `document.getElementById("filter-tool").value`); v != "note" {
		t.Errorf("the filter form shows tool %q", v)
	}

	// At a narrow width nothing runs off the side.
	narrow := newBrowser(t, narrowWidth, narrowHeight)
	narrow.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	if wide := eval[bool](narrow, `document.scrollingElement.scrollWidth > window.innerWidth + 1`); wide {
		t.Errorf("the timeline is wider than a %dpx screen", narrowWidth)
	}
	narrow.screenshot("session-timeline-narrow")
}

type treeNode struct {
	ID     string `json:"id"`
	Parent string `json:"parent"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// A request's call tree on the page is its lineage in GraphQL: the same
// executions, parent by parent, in the same order, each with its effective
// input (the stated intent taken out) and output, and the request's result.
func TestCallTreeMatchesTheLineage(t *testing.T) {
	f := newFixture(t)
	alice := f.connect("alice")
	call(t, alice, "note", map[string]any{"account_id": "a7", "text": "chargeback pending", "intent": "Record the chargeback for a7."})
	records := f.requests("alice")
	request := records[len(records)-1]

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/execution/"+request["id"].(string)), "execution")
	tree := eval[[]treeNode](b, `[...document.querySelectorAll("#call-tree li.call")].map((li) => ({
		id: li.dataset.execution, name: li.dataset.name, status: li.dataset.status,
		parent: (li.parentElement.closest("li.call") || {dataset: {}}).dataset.execution || ""}))`)

	data := f.env.MustGraphQL(`query($id: ID!) { execution(id: $id) { id calls { id actionName status calls { id actionName status calls { id actionName status } } } } }`,
		map[string]any{"id": request["id"]})
	var lineage []treeNode
	var walk func(parent string, calls []any)
	walk = func(parent string, calls []any) {
		for _, c := range calls {
			node := c.(map[string]any)
			lineage = append(lineage, treeNode{ID: node["id"].(string), Parent: parent, Name: node["actionName"].(string), Status: node["status"].(string)})
			children, _ := node["calls"].([]any)
			walk(node["id"].(string), children)
		}
	}
	walk("", at.Dig(data, "execution", "calls").([]any))
	if len(lineage) < 2 {
		t.Fatalf("the note call should have a graphql call beneath it: %s", at.AsJSON(lineage))
	}
	if !slices.Equal(tree, lineage) {
		t.Fatalf("the page's call tree\n%s\nGraphQL's lineage\n%s", at.AsJSON(tree), at.AsJSON(lineage))
	}
	if intent := eval[string](b, `document.getElementById("intent").textContent`); !strings.Contains(intent, "Record the chargeback for a7.") {
		t.Errorf("the stated intent reads %q", intent)
	}
	input := eval[string](b, `document.querySelector("#call-tree li.call pre.input").textContent`)
	var effective map[string]any
	if err := json.Unmarshal([]byte(input), &effective); err != nil || effective["account_id"] != "a7" || effective["intent"] != nil {
		t.Errorf("the note call's effective input reads %s (%v)", input, err)
	}
	result := eval[string](b, `document.querySelector("pre.result").textContent`)
	if !strings.Contains(result, `"noted": "a7"`) || !strings.Contains(result, "com.twisp/preview") {
		t.Errorf("the result the client received reads %s", result)
	}
	b.screenshot("request")
}

// ACT-363: a viewer whose policies cannot read a row of a write set sees it
// only counted, as GraphQL shows it to them; the local root sees the row.
func TestUnreadableRowsAreOnlyCounted_ACT363(t *testing.T) {
	f := newFixture(t)
	alice := f.connect("alice")
	call(t, alice, "note", map[string]any{"account_id": "a9", "text": "secret-balance-note", "intent": "Note a9's balance."})
	records := f.requests("alice")
	request := f.env.Execution(records[len(records)-1]["id"].(string))
	noteCall := request["calls"].([]any)[0].(map[string]any)
	if len(noteCall["writeSet"].([]any)) == 0 {
		t.Fatalf("the preview call recorded no write set: %s", at.AsJSON(noteCall))
	}

	root := newBrowser(t, laptopWidth, laptopHeight)
	root.open(f.page("/execution/"+noteCall["id"].(string)), "execution")
	if !eval[bool](root, `[...document.querySelectorAll("table.writeset code")].some((c) => c.textContent === "notes/a9")`) {
		t.Errorf("the local root does not see the row notes/a9")
	}

	// auditor may read the records but no financial row.
	f.env.PutPrincipal("auditor", []map[string]any{at.Allow([]string{"SELECT"}, "actions.*")})
	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/servers"), "servers")
	b.click("#sign-in")
	b.waitFor("the token form", `document.getElementById("token")`, 10*time.Second)
	token := f.graphqlToken("auditor", "carol")
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token))
	b.follow("#use-token", "servers")
	if who := eval[string](b, `document.getElementById("viewer").textContent`); who != "auditor" {
		t.Errorf("the header says the page views as %q", who)
	}
	b.visit("/execution/"+noteCall["id"].(string), "execution")
	shown := eval[struct {
		Rows    int    `json:"rows"`
		Counted string `json:"counted"`
		Text    string `json:"text"`
	}](b, `({rows: document.querySelectorAll("table.writeset tbody tr").length,
		counted: (document.getElementById("sec-write-set").parentElement.querySelector(".unreadable") || {dataset: {}}).dataset.count || "",
		text: document.querySelector("#sec-write-set") ? document.querySelector("#sec-write-set").parentElement.innerText : ""})`)

	var asAuditor struct {
		Data struct {
			Execution struct {
				WriteSet           []any `json:"writeSet"`
				WriteSetUnreadable int   `json:"writeSetUnreadable"`
			} `json:"execution"`
		} `json:"data"`
	}
	postGraphQL(t, f.env.URL, token, `query($id: ID!) { execution(id: $id) { writeSet { key } writeSetUnreadable } }`, map[string]any{"id": noteCall["id"]}, &asAuditor)
	want := asAuditor.Data.Execution
	if want.WriteSetUnreadable == 0 || len(want.WriteSet) != 0 {
		t.Fatalf("GraphQL shows the auditor %s", at.AsJSON(want))
	}
	if shown.Rows != 0 || shown.Counted != at.AsJSON(want.WriteSetUnreadable) || strings.Contains(shown.Text, "notes/a9") {
		t.Errorf("the auditor's page shows %d rows, counts %q (GraphQL counts %d):\n%s", shown.Rows, shown.Counted, want.WriteSetUnreadable, shown.Text)
	}
	b.screenshot("request-unreadable")
}

// ACT-107, ACT-502: closing a session from the page makes the next
// tools/call of its host a tool error session_closed, and the refusal is
// then on the session's page.
func TestClosingASessionFromThePage_ACT107_ACT502(t *testing.T) {
	f := newFixture(t)
	alice, bob := f.connect("alice"), f.connect("bob")
	call(t, alice, "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	call(t, bob, "lookup", map[string]any{"account_id": "b1", "intent": "Check b1."})

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/server/"+f.serverID), "server")
	sessions := eval[[]string](b, `[...document.querySelectorAll("table.sessions tr[data-session]")].map((tr) => tr.dataset.session)`)
	if !slices.Equal(sessions, []string{f.session("alice"), f.session("bob")}) {
		t.Fatalf("the server's sessions read %v", sessions)
	}
	b.screenshot("server")
	button := `button.close-session[data-session="` + f.session("alice") + `"]`
	b.click(button)
	if eval[string](b, `document.querySelector('`+button+`').dataset.confirm || ""`) != "yes" {
		t.Fatal("one press closed the session without asking")
	}
	b.click(button)
	b.waitFor("alice's session to show closed", `document.querySelector('tr[data-session="`+f.session("alice")+`"][data-closed="true"]')`, 15*time.Second)

	res := call(t, alice, "lookup", map[string]any{"account_id": "a1", "intent": "Check a1 again."})
	if !res.IsError || toolErrorCode(res) != "session_closed" {
		t.Fatalf("the next tools/call after closing from the page: isError %v, code %q", res.IsError, toolErrorCode(res))
	}
	if res := call(t, bob, "lookup", map[string]any{"account_id": "b1", "intent": "Check b1 again."}); res.IsError {
		t.Errorf("bob's session was closed too")
	}
	b.visit("/session/"+f.serverID+"/"+f.session("alice"), "session")
	b.waitFor("the refusal", `[...document.querySelectorAll("#refusals table.refusals code")].some((c) => c.textContent === "session_closed")`, 15*time.Second)
	if eval[bool](b, `!!document.getElementById("close-session")`) {
		t.Errorf("a closed session still offers to close")
	}
}

// ACT-524: refusals are shown with their reason, and the refusal recorded
// after a throttled minute says how many were only counted.
func TestRefusalsShowTheirReasonAndWhatWasOnlyCounted_ACT524(t *testing.T) {
	fake := clock.NewFake(at.Start)
	f := newFixtureWith(t, at.Options{Clock: fake})
	call(t, f.connect("alice"), "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	token := f.env.Token(principal, "alice")
	for range 5 {
		f.env.Post("fraud-ops", token, at.Request{Method: "foo/bar"})
	}
	fake.Advance(61 * time.Second)
	f.env.Post("fraud-ops", token, at.Request{Method: "foo/bar"})

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	b.waitFor("the refusals", `document.querySelectorAll("#refusals table.refusals tbody tr").length === 2`, 15*time.Second)
	rows := eval[[]string](b, `[...document.querySelectorAll("#refusals table.refusals tbody tr")].map((tr) => tr.innerText.replace(/\s+/g, " "))`)
	if !strings.Contains(rows[0], "method_not_found") && !strings.Contains(rows[0], "foo/bar") {
		t.Errorf("the newest refusal does not say why: %s", rows[0])
	}
	if !strings.Contains(rows[0], "4 unrecorded_refusals") || strings.Contains(rows[1], "unrecorded_refusals") {
		t.Errorf("the refusals read %q", rows)
	}
	b.follow("#refusals table.refusals tbody tr a", "execution")
	if n := eval[string](b, `document.getElementById("unrecorded").textContent`); n != "4" {
		t.Errorf("the refusal's page counts %s unrecorded refusals, want 4", n)
	}
	if code := eval[string](b, `document.querySelector("#refusal code").textContent`); code == "" {
		t.Errorf("the refusal's page names no code")
	}
}

// A comparison of two recorded requests — the same call before and after
// the tool changed — highlights the output that changed, and says the calls
// were the same.
func TestCompareHighlightsAChangedOutput(t *testing.T) {
	f := newFixture(t)
	alice := f.connect("alice")
	call(t, alice, "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	f.env.UpdateAction(f.lookupID, map[string]any{"config": map[string]any{"expression": `{"account": event.data.account_id, "flagged": true}`}})
	call(t, alice, "lookup", map[string]any{"account_id": "a1", "intent": "Check a1 after the rule change."})
	records := f.requests("alice")
	before, after := records[len(records)-2]["id"].(string), records[len(records)-1]["id"].(string)

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/replay/"+f.serverID), "replay")
	b.screenshot("replay")
	b.click(`input.pick[data-execution="` + before + `"]`)
	b.click(`input.pick[data-execution="` + after + `"]`)
	b.follow("#compare-picked", "compare")
	verdicts := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#verdicts li")].map((li) => [li.dataset.part, li.dataset.same]))`)
	if verdicts["output"] != "false" || verdicts["calls"] != "true" {
		t.Fatalf("verdicts %v: want the output to differ and the calls not", verdicts)
	}
	changed := eval[map[string][]string](b, `({left: [...document.querySelectorAll('[data-part="output"] pre[data-side="left"] .changed')].map((l) => l.textContent.trim()),
		right: [...document.querySelectorAll('[data-part="output"] pre[data-side="right"] .changed')].map((l) => l.textContent.trim())})`)
	if !containsLine(changed["left"], `"flagged": false`) || !containsLine(changed["right"], `"flagged": true`) || containsLine(changed["left"], `"account": "a1"`) {
		t.Errorf("changed lines %v", changed)
	}
	b.screenshot("compare")
}

// ACT-543, ACT-546: the replay view replays a picked request for real,
// against a draft that pins the tool's later version, and shows the replay
// beside its original with the changed output highlighted.
func TestReplayShowsAChangedOutput(t *testing.T) {
	f := newFixture(t)
	call(t, f.connect("alice"), "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	f.env.UpdateAction(f.lookupID, map[string]any{"config": map[string]any{"expression": `{"account": event.data.account_id, "flagged": true}`}})
	original := f.requests("alice")[len(f.requests("alice"))-1]["id"].(string)

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/replay/"+f.serverID), "replay")
	b.click(`input.pick[data-execution="` + original + `"]`)
	draft := `{"tools": [{"name": "lookup", "version": 2}, {"name": "note"}, {"name": "graphql"}]}`
	eval[bool](b, `(() => { document.getElementById("replay-draft").value = `+strconv.Quote(draft)+`; return true; })()`)
	b.click("#replay")
	b.waitFor("the replay", `document.querySelectorAll("#replay-results table.replays tbody tr").length === 1`, 30*time.Second)
	row := eval[map[string]string](b, `({...document.querySelector("#replay-results table.replays tbody tr").dataset})`)
	if row["execution"] != original || row["output"] != "false" || row["writes"] != "true" {
		t.Fatalf("the replay's row %v: want the output to differ and the write set not", row)
	}
	if status := eval[string](b, `document.getElementById("replay-status").textContent`); !strings.Contains(status, "1 differ") {
		t.Errorf("the status says %q", status)
	}
	b.screenshot("replayed")
	b.follow("#replay-results a.compare", "compare")
	verdicts := eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll("#verdicts li")].map((li) => [li.dataset.part, li.dataset.same]))`)
	if verdicts["output"] != "false" || verdicts["writes"] != "true" {
		t.Fatalf("verdicts %v: want the output to differ and the write set not", verdicts)
	}
	changed := eval[map[string][]string](b, `({left: [...document.querySelectorAll('[data-part="output"] pre[data-side="left"] .changed')].map((l) => l.textContent.trim()),
		right: [...document.querySelectorAll('[data-part="output"] pre[data-side="right"] .changed')].map((l) => l.textContent.trim())})`)
	if !containsLine(changed["left"], `"flagged": false`) || !containsLine(changed["right"], `"flagged": true`) {
		t.Errorf("changed lines %v", changed)
	}
	// The replay committed nothing and was recorded beside its original.
	replays := f.env.ExecutionsWhere(map[string]any{"actionId": f.serverID, "role": "replay"})
	if len(replays) != 1 || replays[0]["preview"] != true {
		t.Errorf("replays recorded: %s", at.AsJSON(replays))
	}
	b.screenshot("replay-compare")
}

func containsLine(lines []string, part string) bool {
	for _, l := range lines {
		if strings.Contains(l, part) {
			return true
		}
	}
	return false
}

// The servers view lists each server with its mode and version and the
// tools it offers with the annotations GraphQL derives for them.
func TestServersShowModeAndAnnotatedTools(t *testing.T) {
	f := newFixture(t)
	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/servers"), "servers")
	shown := eval[[]struct {
		Name     string `json:"name"`
		ReadOnly bool   `json:"readOnly"`
	}](b, `[...document.querySelectorAll('tr[data-server="fraud-ops"] li[data-tool]')].map((li) => ({name: li.dataset.tool, readOnly: !!li.querySelector(".badge.readonly")}))`)
	data := f.env.MustGraphQL(`query($id: ID!) { action(id: $id) { offeredTools { tools { name annotations { readOnlyHint } } } } }`, map[string]any{"id": f.serverID})
	var want []string
	for i, tool := range at.Dig(data, "action", "offeredTools", "tools").([]any) {
		name := at.Dig(tool, "name").(string)
		want = append(want, name)
		if i < len(shown) && shown[i].ReadOnly != (at.Dig(tool, "annotations", "readOnlyHint") == true) {
			t.Errorf("%s: the page says read-only %v", name, shown[i].ReadOnly)
		}
	}
	var names []string
	for _, s := range shown {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, want) || !slices.Equal(want, []string{"lookup", "note", "graphql"}) {
		t.Fatalf("the page lists %v, GraphQL offers %v", names, want)
	}
	if mode := eval[string](b, `document.querySelector('tr[data-server="fraud-ops"] .badge').textContent`); mode != "PREVIEW" {
		t.Errorf("fraud-ops shows mode %q", mode)
	}
	b.screenshot("servers")
}

// Copy-as-GraphQL gives the operations the view ran, which any GraphQL
// client can run again and get what the view shows.
func TestCopyAsGraphQLRunsAsIs(t *testing.T) {
	f := newFixture(t)
	call(t, f.connect("alice"), "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	b.click("#copy-graphql")
	b.waitFor("the dialog", `document.getElementById("graphql-text")`, 10*time.Second)
	text := eval[string](b, `document.getElementById("graphql-text").value`)
	ops := splitOperations(t, text)
	if len(ops) == 0 || !strings.Contains(ops[0].query, "query ExplorerSession") {
		t.Fatalf("copied:\n%s", text)
	}
	for _, op := range ops {
		var out struct {
			Data   map[string]any `json:"data"`
			Errors []any          `json:"errors"`
		}
		postGraphQL(t, f.env.URL, "", op.query, op.variables, &out)
		if len(out.Errors) > 0 || out.Data == nil {
			t.Errorf("the copied operation fails: %v\n%s", out.Errors, op.query)
		}
	}
	b.do(chromedp.KeyEvent(kb.Escape))
}

type operation struct {
	query     string
	variables map[string]any
}

// splitOperations reads the copied text back: operations apart by a blank
// line, each led by its "# variables:" line when it has variables.
func splitOperations(t testing.TB, text string) []operation {
	t.Helper()
	var ops []operation
	for _, chunk := range strings.Split(strings.TrimSpace(text), "\n\n") {
		op := operation{query: chunk}
		if rest, ok := strings.CutPrefix(chunk, "# variables: "); ok {
			line, query, _ := strings.Cut(rest, "\n")
			if err := json.Unmarshal([]byte(line), &op.variables); err != nil {
				t.Fatalf("variables %s: %v", line, err)
			}
			op.query = query
		}
		ops = append(ops, op)
	}
	return ops
}

// Everything is reachable from the keyboard: tabbing from the top reaches a
// request of the timeline, and Enter opens it.
func TestKeyboardReachesAndOpensARequest(t *testing.T) {
	f := newFixture(t)
	call(t, f.connect("alice"), "lookup", map[string]any{"account_id": "a1", "intent": "Check a1."})
	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/session/"+f.serverID+"/"+f.session("alice")), "session")
	for i := 0; i < 60 && !eval[bool](b, `document.activeElement.matches(".entry-link")`); i++ {
		b.do(chromedp.KeyEvent(kb.Tab))
	}
	target := eval[string](b, `document.activeElement.matches(".entry-link") ? document.activeElement.closest("li").dataset.execution : ""`)
	if target == "" {
		t.Fatal("60 presses of Tab did not reach a request of the timeline")
	}
	eval[any](b, `delete document.documentElement.dataset.readyAt; null`)
	b.do(chromedp.KeyEvent(kb.Enter))
	b.waitView("execution")
	if shown := eval[string](b, `document.getElementById("execution-id").textContent`); shown != target {
		t.Errorf("Enter opened %s, want %s", shown, target)
	}
}

// Away from loopback GraphQL has no local root, so the page asks for a
// token, and then shows what that token's principal may read.
func TestAsksForATokenWhereThereIsNoLocalRoot(t *testing.T) {
	remote, srv := startRemote(t)
	b := newBrowser(t, laptopWidth, laptopHeight)
	b.do(chromedp.Navigate(remote + "/explorer/#/servers"))
	b.waitFor("the token form", `document.getElementById("token")`, 20*time.Second)
	if who := eval[string](b, `document.getElementById("who").textContent`); who != "Not signed in" {
		t.Errorf("before a token the header says %q", who)
	}
	b.screenshot("token")
	token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana", Audience: auth.GraphQLAudience(remote)})
	if err != nil {
		t.Fatal(err)
	}
	b.do(chromedp.SetValue(chromedp.CSS("#token"), token))
	b.follow("#use-token", "servers")
	if !eval[bool](b, `!!document.querySelector('tr[data-server="default"]')`) {
		t.Errorf("with a token of the local principal the default server is not listed")
	}
}

// startRemote runs actiond as it runs when it listens on every interface:
// GraphQL then has no local root. The test reaches it on loopback.
func startRemote(t *testing.T) (string, *server.Server) {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	srv, err := server.New(context.Background(), server.Options{Store: storetest.Options(t, store.SQLite), PublicURL: url, Listen: ":8080"})
	if err != nil {
		ts.Close()
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
	})
	return url, srv
}

func postGraphQL(t testing.TB, base, token, query string, variables map[string]any, out any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": variables})
	req, _ := http.NewRequest(http.MethodPost, base+"/financial/v1/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("graphql: HTTP %d %s", resp.StatusCode, raw)
	}
}

// A task's page shows its transcript from the executions beneath it — the
// model's exchanges, the tool it called and what it answered — and the
// request that started it lists it under the tasks it started (the
// startedBy filter).
func TestTaskTranscriptAndStartedTasks(t *testing.T) {
	const key = "explorer-model-key"
	model := at.FakeModel(t, key, func(x modeltest.Exchange) modeltest.Reply {
		if x.Turn() == 1 {
			return modeltest.Reply{ToolUses: []modeltest.ToolUse{{ID: "use-1", Name: "lookup", Input: map[string]any{"account_id": "a7"}}}, StopReason: "tool_use"}
		}
		return modeltest.Reply{Text: "Account a7 is not flagged."}
	})
	f := newFixtureWith(t, at.Options{Models: at.Providers(model, key)})
	agentID := at.NewID()
	f.env.CreateAction(agentID, at.AgentSpec{Name: "reviewer", Model: "review-model", Instructions: "Review the account you are given.",
		InputSchema: at.Object(map[string]any{"account_id": at.String()}, "account_id"), Tools: []map[string]any{at.Ref("lookup")}}.Input())
	serverID := at.NewID()
	f.env.CreateAction(serverID, at.ServerSpec{Name: "reviews", Intent: "NONE", Policies: at.Everything(), Tools: []map[string]any{at.Ref("reviewer")}}.Input())
	reply := f.env.Post("reviews", f.env.Token(principal, "alice"), at.Request{Method: "tools/call",
		Capabilities: map[string]any{"extensions": map[string]any{mcpkit.TasksExtension: map[string]any{}}},
		Params:       map[string]any{"name": "reviewer", "arguments": map[string]any{"account_id": "a7"}}})
	taskID, _ := at.Dig(reply.Result(), "task", "taskId").(string)
	if taskID == "" {
		taskID, _ = at.Dig(reply.Result(), "taskId").(string)
	}
	if taskID == "" {
		t.Fatalf("the agent's call: %s", reply)
	}
	at.WaitFor(t, "the task to succeed", time.Minute, func() bool {
		e := f.env.Execution(taskID)
		return e != nil && e["status"] == "SUCCEEDED"
	})
	request := f.env.ExecutionsWhere(map[string]any{"actionId": serverID, "method": "tools/call"})[0]["id"].(string)
	if started := f.env.ExecutionsWhere(map[string]any{"startedBy": request}); len(started) != 1 || started[0]["id"] != taskID {
		t.Fatalf("startedBy %s lists %s", request, at.AsJSON(started))
	}

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/execution/"+request), "execution")
	b.waitFor("the started task", `document.querySelectorAll("table.started tbody tr").length === 1`, 15*time.Second)
	b.follow("table.started a.started-task", "execution")
	b.waitFor("the transcript", `document.querySelectorAll("#transcript li.turn").length > 0`, 15*time.Second)
	turns := eval[[]map[string]string](b, `[...document.querySelectorAll("#transcript li.turn")].map((li) => ({kind: li.dataset.kind, text: li.innerText}))`)
	var kinds []string
	all := ""
	for _, turn := range turns {
		kinds = append(kinds, turn["kind"])
		all += turn["text"] + "\n"
	}
	want := []string{"system", "user", "assistant", "tool", "user", "assistant"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("transcript turns %v, want %v:\n%s", kinds, want, all)
	}
	for _, part := range []string{"Review the account you are given.", "a7", "\u2192 lookup", "Called lookup", `"flagged": false`, "Account a7 is not flagged."} {
		if !strings.Contains(all, part) {
			t.Errorf("the transcript lacks %q:\n%s", part, all)
		}
	}
	if by := eval[string](b, `document.querySelector("#started-by").innerText`); by != request {
		t.Errorf("the task's page says it was started by %q, want %s alone", by, request)
	}
	b.screenshot("transcript")
}

// span is one bar of the waterfall as the page drew it.
type span struct {
	ID    string  `json:"id"`
	X     float64 `json:"x"`
	Width float64 `json:"width"`
}

// A request's waterfall draws each execution of its call tree as a bar on
// one time axis, in lineage order: each starts where its execution started
// and is as wide as it ran, at the one scale of the whole drawing, whose
// axis the longest execution (the request itself) spans.
func TestWaterfallDrawsEachCallWhereAndAsLongAsItRan(t *testing.T) {
	f := newFixture(t)
	// tally counts before and after its graphql call, so that the call
	// starts well after the tool and ends well before it.
	const tallySource = `
def run(event):
    n = 0
    for i in range(event["data"]["rounds"]):
        n += i
    graphql("mutation($v: JSON!) { kv { put(namespace: \"tallies\", key: \"t\", value: $v) { key } } }", variables = {"v": {"n": n}})
    for i in range(event["data"]["rounds"]):
        n -= i
    return {"tally": n}
`
	f.env.CreateAction(at.NewID(), at.StarlarkTool("tally", tallySource, at.Object(map[string]any{"rounds": map[string]any{"type": "integer"}}, "rounds"),
		[]map[string]any{at.Ref("graphql")}))
	serverID := at.NewID()
	f.env.CreateAction(serverID, at.ServerSpec{Name: "tally-ops", Policies: at.Everything(), Tools: []map[string]any{at.Ref("tally")}}.Input())
	alice := f.env.Connect("tally-ops", f.env.Token(principal, "alice"), at.Revision2026)
	if res := call(t, alice, "tally", map[string]any{"rounds": 40000, "intent": "Count."}); res.IsError {
		t.Fatalf("tally: %s", at.AsJSON(res.Content))
	}
	records := f.env.ExecutionsWhere(map[string]any{"actionId": serverID, "sessionId": f.session("alice")})
	request := records[len(records)-1]

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/execution/"+request["id"].(string)), "execution")
	bars := eval[[]span](b, `[...document.querySelectorAll("#waterfall g.span")].map((g) => {
		const bar = g.querySelector("rect.bar");
		return {id: g.dataset.execution, x: bar.x.baseVal.value, width: bar.width.baseVal.value}; })`)
	axis := eval[float64](b, `(() => { const l = document.querySelector("#waterfall .axis > line"); return l.x2.baseVal.value - l.x1.baseVal.value; })()`)

	type timed struct {
		id         string
		start, end time.Time
	}
	data := f.env.MustGraphQL(`query($id: ID!) { execution(id: $id) { id startedAt endedAt
		calls { id startedAt endedAt calls { id startedAt endedAt calls { id startedAt endedAt } } } } }`, map[string]any{"id": request["id"]})
	var executions []timed
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		// The page reads times to the millisecond, as JavaScript's Date does.
		parse := func(key string) time.Time {
			ts, err := time.Parse(time.RFC3339Nano, node[key].(string))
			if err != nil {
				t.Fatalf("%s of %s: %v", key, node["id"], err)
			}
			return ts.Truncate(time.Millisecond)
		}
		executions = append(executions, timed{node["id"].(string), parse("startedAt"), parse("endedAt")})
		children, _ := node["calls"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(at.Dig(data, "execution").(map[string]any))
	if len(executions) < 3 || len(bars) != len(executions) {
		t.Fatalf("the waterfall has %d bars for %d executions (want the request, the tally call and its graphql call): %s", len(bars), len(executions), at.AsJSON(bars))
	}
	if inner, outer := executions[2], executions[1]; !inner.start.After(outer.start) || !inner.end.Before(outer.end) {
		t.Fatalf("the graphql call (%v to %v) should lie well inside the tally call (%v to %v)", inner.start, inner.end, outer.start, outer.end)
	}
	origin := executions[0].start
	last := executions[0].end
	for _, e := range executions {
		if e.end.After(last) {
			last = e.end
		}
	}
	total := max(float64(last.Sub(origin).Milliseconds()), 1)
	pixelsPerMs := axis / total
	for i, e := range executions {
		ms := float64(e.end.Sub(e.start).Milliseconds())
		wantX := bars[0].X + float64(e.start.Sub(origin).Milliseconds())*pixelsPerMs
		wantWidth := max(ms*pixelsPerMs, 1)
		if bars[i].ID != e.id || abs(bars[i].X-wantX) > 0.5 || abs(bars[i].Width-wantWidth) > 0.5 {
			t.Errorf("bar %d: %+v, want execution %s at x %.2f, %.2f wide (%v ms of %v on an axis %.0f wide)",
				i, bars[i], e.id, wantX, wantWidth, ms, total, axis)
		}
	}
	b.screenshot("waterfall")
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// earlier is the real clock set back by a shift the test moves forward, so
// that requests land in minutes of the past hour while their durations
// stay real.
type earlier struct {
	clock.Real
	shift atomic.Int64
}

func (c *earlier) Now() time.Time                  { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *earlier) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// minute is one bar or point of the last hour's chart as the page drew it.
type minute struct {
	Minute int     `json:"minute"`
	Count  int     `json:"count"`
	Height float64 `json:"height"`
	MS     float64 `json:"ms"`
	Y      float64 `json:"y"`
}

// A server's page draws its last hour: a bar per minute with requests, as
// tall as the minute's count, and the minute's median and 95th percentile
// latency as points as high as those durations, all as GraphQL records
// them.
func TestServerChartDrawsTheLastHourFromTheRecord(t *testing.T) {
	c := &earlier{}
	c.shift.Store(int64(-50 * time.Minute))
	f := newFixtureWith(t, at.Options{Clock: c})
	alice := f.connect("alice")
	for i, group := range []int{3, 1, 2} {
		for range group {
			call(t, alice, "lookup", map[string]any{"account_id": "a" + strconv.Itoa(i), "intent": "Look the account up."})
		}
		c.shift.Add(int64(7 * time.Minute))
	}

	b := newBrowser(t, laptopWidth, laptopHeight)
	b.open(f.page("/server/"+f.serverID), "server")
	b.waitFor("the last hour's chart", `document.getElementById("last-hour") !== null`, 10*time.Second)
	from, err := time.Parse(time.RFC3339Nano, eval[string](b, `document.getElementById("last-hour").dataset.from`))
	if err != nil {
		t.Fatal(err)
	}
	bars := eval[[]minute](b, `[...document.querySelectorAll("#last-hour g.minute")].map((g) => ({
		minute: Number(g.dataset.minute), count: Number(g.dataset.count), height: g.querySelector("rect.requests").height.baseVal.value}))`)
	points := eval[[]minute](b, `[...document.querySelectorAll("#last-hour g.p95 circle")].map((p) => ({
		minute: Number(p.dataset.minute), ms: Number(p.dataset.ms), y: p.cy.baseVal.value}))`)

	// What the record says, minute by minute.
	counts := map[int]int{}
	durations := map[int][]int64{}
	for _, r := range f.env.ExecutionsWhere(map[string]any{"actionId": f.serverID, "role": "request"}) {
		started, _ := time.Parse(time.RFC3339Nano, r["startedAt"].(string))
		ended, _ := time.Parse(time.RFC3339Nano, r["endedAt"].(string))
		m := int(started.Truncate(time.Millisecond).Sub(from) / time.Minute)
		counts[m]++
		durations[m] = append(durations[m], ended.Truncate(time.Millisecond).Sub(started.Truncate(time.Millisecond)).Milliseconds())
	}
	if len(counts) < 3 || len(bars) != len(counts) {
		t.Fatalf("%d bars for %d minutes with requests (%v): %s", len(bars), len(counts), counts, at.AsJSON(bars))
	}
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	perRequest := bars[0].Height / float64(bars[0].Count)
	for _, bar := range bars {
		if bar.Count != counts[bar.Minute] || abs(bar.Height-float64(bar.Count)*perRequest) > 0.5 {
			t.Errorf("minute %d: %d requests %.2f high, want %d requests at %.2f per request", bar.Minute, bar.Count, bar.Height, counts[bar.Minute], perRequest)
		}
	}
	if tallest := float64(most) * perRequest; abs(tallest-90) > 0.5 {
		t.Errorf("the busiest minute's bar is %.2f high, want the chart's full 90", tallest)
	}
	if len(points) != len(counts) {
		t.Fatalf("%d latency points for %d minutes: %s", len(points), len(counts), at.AsJSON(points))
	}
	for _, p := range points {
		d := durations[p.Minute]
		slices.Sort(d)
		if want := d[max(int(math.Ceil(0.95*float64(len(d))))-1, 0)]; p.MS != float64(want) {
			t.Errorf("minute %d: 95th percentile %v ms, want %d ms of %v", p.Minute, p.MS, want, d)
		}
	}
	// Higher on the page is slower: the points' heights follow their
	// durations at one scale.
	for _, p := range points {
		for _, q := range points {
			if p.MS > q.MS && !(p.Y < q.Y) {
				t.Errorf("minute %d (%v ms) is drawn at y %.2f, not above minute %d (%v ms) at %.2f", p.Minute, p.MS, p.Y, q.Minute, q.MS, q.Y)
			}
		}
	}
	b.screenshot("server-last-hour")
}
