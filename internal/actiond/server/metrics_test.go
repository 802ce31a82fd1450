package server_test

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/testkit"
)

func scrape(t *testing.T, base string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// sample is the value of the series written exactly as series (name and
// sorted labels) in the exposition, or -1 when it is absent.
func sample(exposition []byte, series string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(exposition)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		return -1
	}
	return v
}

// With --metrics, GET /metrics counts the MCP requests by server, method
// and status with their latency, the refusals by reason, the database's
// commits, the tasks waiting and the sessions open, in an exposition
// promtool accepts; labels never carry a principal, a subject, an unknown
// server's name or a method a client made up.
func TestMetrics(t *testing.T) {
	base, srv := loopbackServerWith(t, func(o *server.Options) { o.Metrics = true })
	token, err := srv.Issuer.Mint(auth.MintOptions{Principal: server.LocalPrincipal, Subject: "dana-the-subject"})
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, bearer, method string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	const endpoint = "/mcp/v1/000000000000/default"
	for range 2 {
		if status := post(endpoint, token, "tools/list"); status != http.StatusOK {
			t.Fatalf("tools/list: %d", status)
		}
	}
	if status := post(endpoint, "", "tools/list"); status != http.StatusUnauthorized {
		t.Fatalf("without a token: %d", status)
	}
	if status := post("/mcp/v1/000000000000/secret-name", token, "tools/list"); status != http.StatusNotFound {
		t.Fatalf("an unknown server: %d", status)
	}
	if status := post(endpoint, token, "made/up-method"); status != http.StatusNotFound {
		t.Fatalf("an unknown method: %d", status)
	}

	status, body := scrape(t, base)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", status, body)
	}
	testkit.PromtoolCheck(t, body)
	for series, want := range map[string]float64{
		`actiond_mcp_requests_total{method="tools/list",server="default",status="200"}`:               2,
		`actiond_mcp_requests_total{method="tools/list",server="",status="401"}`:                      1,
		`actiond_mcp_requests_total{method="tools/list",server="",status="404"}`:                      1,
		`actiond_mcp_requests_total{method="other",server="default",status="404"}`:                    1,
		`actiond_mcp_request_duration_seconds_count{method="tools/list",server="default"}`:            2,
		`actiond_mcp_request_duration_seconds_bucket{method="tools/list",server="default",le="+Inf"}`: 2,
		`actiond_mcp_refusals_total{reason="mcp_unauthorized"}`:                                       1,
		`actiond_mcp_refusals_total{reason="mcp_method_not_found"}`:                                   1,
		`actiond_sessions_open`:                   1,
		`actiond_tasks_waiting{state="queued"}`:   0,
		`actiond_tasks_waiting{state="retrying"}`: 0,
		`actiond_task_queue_oldest_seconds`:       0,
	} {
		if got := sample(body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if commits := sample(body, "actiond_store_commit_duration_seconds_count"); commits < 3 {
		t.Errorf("commits counted: %v, want the admissions' and completions' at least", commits)
	}
	for _, leak := range []string{"dana-the-subject", server.LocalPrincipal + `"`, "secret-name", "made/up-method"} {
		if bytes.Contains(body, []byte(leak)) {
			t.Errorf("the metrics name %q", leak)
		}
	}
}

// Without --metrics there is no /metrics.
func TestMetricsOffByDefault(t *testing.T) {
	base, _ := loopbackServer(t)
	if status, body := scrape(t, base); status != http.StatusNotFound {
		t.Errorf("GET /metrics without --metrics: %d %.200s", status, body)
	}
}
