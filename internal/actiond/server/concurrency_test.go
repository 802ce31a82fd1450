package server_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// burst sends n tools/call requests of one session at once, spread over the
// processes, and counts the answers by kind.
func burst(t *testing.T, processes []*at.Process, token string, n int) map[string]int {
	t.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}
	client := &http.Client{Transport: transport, Timeout: 2 * time.Minute}
	defer transport.CloseIdleConnections()
	counts := map[string]int{}
	var mu sync.Mutex
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			p := processes[i%len(processes)]
			body, header := at.Request{Method: "tools/call", ID: i, Params: map[string]any{"name": "one", "arguments": map[string]any{}}}.Body()
			ready.Done()
			<-start
			reply, err := at.PostBody(context.Background(), client, p.URL+"/mcp/v1/"+at.Account+"/burst", token, body, header)
			kind := ""
			switch {
			case err != nil:
				kind = "transport error: " + err.Error()
			case reply.Status == 200 && reply.Result() != nil && reply.Result()["isError"] != true:
				kind = "admitted"
			case reply.Status == 429 && reply.DataCode() == "mcp_rate_limited" && reply.Header.Get("Retry-After") != "":
				kind = "429 mcp_rate_limited"
			case reply.Status == 503 && reply.DataCode() == "mcp_transaction_error" && at.Dig(reply.RPC, "error", "data", "retryable") == true:
				kind = "503 mcp_transaction_error (retryable)"
			default:
				kind = "unexpected: " + reply.String()
			}
			mu.Lock()
			counts[kind]++
			mu.Unlock()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return counts
}

// ACT-515, ACT-516: 200 calls of one session at the same moment, with
// callsPerMinute 50, admit exactly 50: on SQLite through one actiond, on
// Postgres through two actiond processes sharing one schema. The others get
// 429 or a retryable mcp_transaction_error.
func TestBurstAdmitsExactlyTheLimit(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		opts := storetest.Options(t, d)
		public := "http://" + at.FreeAddr(t)
		var processes []*at.Process
		count := 1
		if d == store.Postgres {
			count = 2
			at.CreateSchema(t, opts)
		}
		for range count {
			processes = append(processes, at.StartProcess(t, binary, opts, public))
		}
		env := processes[0].Env(d)
		env.CreateAction(at.NewID(), at.CELTool("one", `1`, nil))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "burst", Intent: "NONE", Mode: "LIVE", CallsPerMinute: 50,
			Policies: at.Everything(), Tools: []map[string]any{at.Ref("one")}}.Input())
		token := processes[0].Token(server.LocalPrincipal, "burster")
		counts := burst(t, processes, token, 200)
		t.Logf("%s with %d actiond: %v", d, count, counts)
		sessionID := at.SessionIDFor(server.LocalPrincipal, "burster")
		admitted := env.ExecutionsWhere(map[string]any{"actionId": serverID, "sessionId": sessionID})
		if len(admitted) != 50 || counts["admitted"] != 50 {
			t.Errorf("%d requests recorded in the session and %d answered with a result, want exactly 50", len(admitted), counts["admitted"])
		}
		if counts["admitted"]+counts["429 mcp_rate_limited"]+counts["503 mcp_transaction_error (retryable)"] != 200 {
			t.Errorf("answers other than a result, 429 or a retryable 503: %v", counts)
		}
		inputs := env.Session(serverID, sessionID)["inputs"].([]any)
		if len(inputs) != 50 {
			t.Errorf("the session has %d inputs, want 50", len(inputs))
		}
		for _, p := range processes {
			p.Stop()
		}
	})
}
