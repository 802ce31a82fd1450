package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
	"github.com/incusspawn/isx/internal/actiond/server"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

const stampSource = `
def run(event):
    k = event["data"]["k"]
    graphql("mutation($k: String!, $v: JSON!) { kv { put(namespace: \"crash\", key: $k, value: $v) { key } } }", variables = {"k": k, "v": {"k": k}})
    return {"k": k}
`

// sent is what the load's clients sent and received, by JSON-RPC id.
type sent struct {
	mu       sync.Mutex
	requests map[float64]string         // id → the k it asked to stamp
	answers  map[float64]map[string]any // id → the JSON-RPC response received
}

// ACT-118, ACT-119 under a crash: actiond is killed with SIGKILL while 16
// clients call a LIVE tool that writes a row, then restarted on the same
// database. The record must agree with what clients saw:
//
//   - every request a client got an answer for is recorded, finished, with
//     the output the client received (the answer left after the commit);
//     a request refused at admission (a retryable mcp_transaction_error when
//     its session is too contended) is recorded as a refusal with the
//     reason its client got, or, after the first of the minute, counted
//     (the seed's refusal throttling);
//   - every finished (SUCCEEDED or FAILED) request execution carries a
//     JSON-RPC id some client sent, for the k it sent; when that client
//     received an answer, the recorded output is that answer; when it did
//     not (killed between commit and reply), the answer was ready to go;
//   - a request execution left RUNNING claims no answer: no output, no end,
//     no calls, its session input still CLAIMED, and its row not written;
//   - a row is written exactly for the SUCCEEDED requests: writes commit
//     with their record or not at all;
//   - nothing stays RUNNING (found tried as a new user would: 3 to 14
//     requests per crash did): the restarted process settles what the dead
//     one left — at once on SQLite, whose one process it is; on Postgres once
//     the dead process's heartbeat is older than the liveness — FAILED with
//     mcp_request_abandoned, no output and no calls, its session input
//     CONSUMED, and the SUCCEEDED records untouched.
func TestCrashKeepsRecordsTruthful(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d store.Dialect) {
		opts := storetest.Options(t, d)
		at.CreateSchema(t, opts)
		p := at.StartProcess(t, binary, opts, "", "--liveness", "2s")
		env := p.Env(d)
		env.CreateAction(at.NewID(), at.StarlarkTool("stamp", stampSource, at.Object(map[string]any{"k": at.String()}, "k"), []map[string]any{at.Ref("graphql")}))
		serverID := at.NewID()
		env.CreateAction(serverID, at.ServerSpec{Name: "crash", Intent: "NONE", Mode: "LIVE", CallsPerMinute: 1_000_000,
			Policies: at.Everything(), Tools: []map[string]any{at.Ref("stamp")}}.Input())
		token := p.Token(server.LocalPrincipal, "loader")

		record := &sent{requests: map[float64]string{}, answers: map[float64]map[string]any{}}
		// The kill comes once the clients have had 1,500 answers.
		const answersBeforeKill = 1500
		var answered atomic.Int64
		enough := make(chan struct{})
		transport := &http.Transport{MaxIdleConnsPerHost: 32}
		client := &http.Client{Transport: transport, Timeout: time.Minute}
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					id := float64(c*1_000_000 + i)
					k := fmt.Sprintf("%d-%d", c, i)
					body, header := at.Request{Method: "tools/call", ID: id, Params: map[string]any{"name": "stamp", "arguments": map[string]any{"k": k}}}.Body()
					record.mu.Lock()
					record.requests[id] = k
					record.mu.Unlock()
					reply, err := at.PostBody(context.Background(), client, p.URL+"/mcp/v1/"+at.Account+"/crash", token, body, header)
					if err != nil {
						return // the process is gone
					}
					record.mu.Lock()
					record.answers[id] = reply.RPC
					record.mu.Unlock()
					if answered.Add(1) == answersBeforeKill {
						close(enough)
					}
				}
			}()
		}
		clientsDone := make(chan struct{})
		go func() {
			wg.Wait()
			close(clientsDone)
		}()
		select {
		case <-enough:
		case <-clientsDone:
			t.Fatalf("the clients stopped after %d answers, before the kill:\n%s", answered.Load(), p.Log())
		}
		p.Kill()
		<-clientsDone
		transport.CloseIdleConnections()

		// Restarted as a deployment restarts it, at its public URL: another
		// URL is refused while the killed process's heartbeat is recent.
		restarted := at.StartProcess(t, binary, opts, p.PublicURL, "--liveness", "2s")
		env = restarted.Env(d)
		at.WaitFor(t, "no request to stay RUNNING", 30*time.Second, func() bool {
			return len(env.ExecutionsWhere(map[string]any{"actionId": serverID, "status": "RUNNING"})) == 0
		})
		rows := kvRows(t, env, "crash")
		var finished, running, unanswered, abandoned int
		seen := map[float64]bool{}
		refusals := 0
		for _, e := range env.Executions(serverID) {
			if at.Dig(e, "mcpRequest", "method") != "tools/call" {
				continue
			}
			id, _ := at.Dig(e, "mcpRequest", "id").(float64)
			k, sentIt := record.requests[id]
			argK := at.Dig(e, "input", "params", "arguments", "k")
			if !sentIt || argK != k {
				t.Errorf("execution %v records id %v (k %v), which no client sent", e["id"], id, argK)
				continue
			}
			seen[id] = true
			answer, got := record.answers[id]
			if e["role"] == "refusal" {
				// Refused at admission (its session was too contended):
				// recorded FAILED with the reason its client got, ran nothing.
				refusals++
				if e["status"] != "FAILED" || got && at.Dig(e, "error", "code") != at.Dig(answer, "error", "data", "code") || len(e["calls"].([]any)) != 0 {
					t.Errorf("refusal %v: %s, the client got %s", e["id"], at.AsJSON(e), at.AsJSON(answer))
				}
				if _, wrote := rows[k]; wrote {
					t.Errorf("refused id %v wrote its row", id)
				}
				continue
			}
			if at.Dig(e, "error", "code") == "mcp_request_abandoned" {
				// Left RUNNING by the killed process, settled by the new one:
				// it claims no answer.
				abandoned++
				if got || e["status"] != "FAILED" || e["output"] != nil || e["endedAt"] == nil || len(e["calls"].([]any)) != 0 {
					t.Errorf("settled leftover %v (answered %v): %s", e["id"], got, at.AsJSON(e))
				}
				if _, wrote := rows[k]; wrote {
					t.Errorf("settled leftover %v wrote its row", e["id"])
				}
				continue
			}
			switch e["status"] {
			case "SUCCEEDED", "FAILED":
				finished++
				if e["endedAt"] == nil || e["output"] == nil {
					t.Errorf("finished execution %v lacks its end or output", e["id"])
				}
				if got {
					if claimed := answerOf(answer); !jsonEqualValues(e["output"], claimed) {
						t.Errorf("id %v: recorded output %s, the client received %s", id, at.AsJSON(e["output"]), at.AsJSON(claimed))
					}
				} else {
					unanswered++
				}
				if _, wrote := rows[k]; wrote != (e["status"] == "SUCCEEDED") {
					t.Errorf("id %v %v: row written %v", id, e["status"], wrote)
				}
			case "RUNNING":
				running++
				if got {
					t.Errorf("id %v was answered but its record is RUNNING", id)
				}
				if e["output"] != nil || e["endedAt"] != nil || len(e["calls"].([]any)) != 0 {
					t.Errorf("RUNNING leftover %v claims an answer: %s", e["id"], at.AsJSON(e))
				}
				if _, wrote := rows[k]; wrote {
					t.Errorf("RUNNING leftover %v wrote its row", e["id"])
				}
			default:
				t.Errorf("execution %v is %v", e["id"], e["status"])
			}
		}
		throttled := 0
		for id, answer := range record.answers {
			if seen[id] {
				continue
			}
			// Only the first refusal of a user each minute is recorded; the
			// others are counted into the next recorded one.
			if code := at.Dig(answer, "error", "data", "code"); (code == "mcp_transaction_error" || code == "mcp_rate_limited") && refusals > 0 {
				throttled++
				continue
			}
			t.Errorf("id %v was answered (%s) but is not recorded", id, at.AsJSON(answer))
		}
		session := env.Session(serverID, at.SessionIDFor(server.LocalPrincipal, "loader"))
		states := map[string]int{}
		for _, in := range session["inputs"].([]any) {
			states[in.(map[string]any)["state"].(string)]++
		}
		if running != 0 || states["CLAIMED"] != 0 || states["CONSUMED"] != finished+abandoned {
			t.Errorf("%d RUNNING, session inputs %v, want none RUNNING or CLAIMED and %d CONSUMED", running, states, finished+abandoned)
		}
		if len(rows) != countStatus(env, serverID, "SUCCEEDED") {
			t.Errorf("%d rows written for %d SUCCEEDED requests", len(rows), countStatus(env, serverID, "SUCCEEDED"))
		}
		t.Logf("%s: %d sent, %d answered, %d recorded finished (%d of them unanswered: killed between commit and reply), %d left RUNNING and settled, "+
			"%d refusals recorded and %d throttled, %d rows",
			d, len(record.requests), len(record.answers), finished, unanswered, abandoned, refusals, throttled, len(rows))
		restarted.Stop()
	})
}

// answerOf is what a JSON-RPC response claims: its result, or {error}.
func answerOf(response map[string]any) any {
	if result, ok := response["result"]; ok {
		return result
	}
	return map[string]any{"error": response["error"]}
}

func countStatus(env *at.Env, serverID, status string) int {
	n := 0
	for _, e := range env.Executions(serverID) {
		if e["status"] == status && at.Dig(e, "mcpRequest", "method") == "tools/call" {
			n++
		}
	}
	return n
}

func kvRows(t *testing.T, env *at.Env, namespace string) map[string]any {
	t.Helper()
	out := map[string]any{}
	var after any
	for {
		data := env.MustGraphQL(`query($n: String!, $after: String) { kv { values(namespace: $n, first: 500, after: $after) {
			edges { node { key value } } pageInfo { hasNextPage endCursor } } } }`, map[string]any{"n": namespace, "after": after})
		conn := at.Dig(data, "kv", "values").(map[string]any)
		for _, edge := range conn["edges"].([]any) {
			node := edge.(map[string]any)["node"].(map[string]any)
			out[node["key"].(string)] = node["value"]
		}
		if at.Dig(conn, "pageInfo", "hasNextPage") != true {
			return out
		}
		after = at.Dig(conn, "pageInfo", "endCursor")
	}
}

func jsonEqualValues(a, b any) bool { return at.AsJSON(normalize(a)) == at.AsJSON(normalize(b)) }

func normalize(v any) any {
	var out any
	b, _ := json.Marshal(v)
	json.Unmarshal(b, &out)
	return out
}
