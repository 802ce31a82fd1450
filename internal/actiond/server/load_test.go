package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	at "github.com/incusspawn/isx/internal/actiond/actiondtest"
)

// load is clients calling the stamp tool of a LIVE server as fast as they
// are answered, and what each request got back.
type load struct {
	mu       sync.Mutex
	requests map[float64]string         // JSON-RPC id → the k it stamps
	answers  map[float64]map[string]any // id → the response, when one arrived
	stop     chan struct{}
	done     sync.WaitGroup
	client   *http.Client
}

// startLoad starts clients against url's server, each sending its next
// request once the last is answered (or failed), until Stop.
func startLoad(url, server, token string, clients int) *load {
	l := &load{requests: map[float64]string{}, answers: map[float64]map[string]any{}, stop: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}, Timeout: time.Minute}}
	for c := range clients {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				id := float64(c*1_000_000 + i)
				k := fmt.Sprintf("%d-%d", c, i)
				body, header := at.Request{Method: "tools/call", ID: id, Params: map[string]any{"name": "stamp", "arguments": map[string]any{"k": k}}}.Body()
				l.mu.Lock()
				l.requests[id] = k
				l.mu.Unlock()
				reply, err := at.PostBody(context.Background(), l.client, url+"/mcp/v1/"+at.Account+"/"+server, token, body, header)
				if err != nil || reply.RPC == nil {
					continue // no answer: the record may say anything but RUNNING
				}
				l.mu.Lock()
				l.answers[id] = reply.RPC
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// Stop stops the clients and waits for their last requests.
func (l *load) Stop() {
	close(l.stop)
	l.done.Wait()
	l.client.CloseIdleConnections()
}

func (l *load) answered() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.answers)
}

// verdict is what a load's records say against what its clients saw.
type verdict struct {
	sent, answered, errors, succeeded, failed, refusals int
}

// check holds the records of a server's tools/call requests against what
// the load's clients got: nothing RUNNING; every request answered with a
// result recorded SUCCEEDED with that result; every request answered with a
// JSON-RPC error recorded FAILED (or, refused before admission committed,
// not at all); a row written exactly for the SUCCEEDED ones.
func (l *load) check(t *testing.T, env *at.Env, serverID string) verdict {
	t.Helper()
	rows := kvRows(t, env, "crash")
	v := verdict{sent: len(l.requests), answered: len(l.answers)}
	for _, answer := range l.answers {
		if answer["error"] != nil {
			v.errors++
		}
	}
	for _, e := range env.Executions(serverID) {
		if at.Dig(e, "mcpRequest", "method") != "tools/call" {
			continue
		}
		id, _ := at.Dig(e, "mcpRequest", "id").(float64)
		k, sentIt := l.requests[id]
		if !sentIt || at.Dig(e, "input", "params", "arguments", "k") != k {
			t.Errorf("execution %v records id %v, which no client sent", e["id"], id)
			continue
		}
		answer, got := l.answers[id]
		_, wrote := rows[k]
		switch {
		case e["status"] == "RUNNING":
			t.Errorf("request %v is still RUNNING (answered %v: %s)", e["id"], got, at.AsJSON(answer))
		case e["role"] == "refusal":
			v.refusals++
			if e["status"] != "FAILED" || wrote {
				t.Errorf("refusal %v: %s", e["id"], at.AsJSON(e))
			}
		case got && answer["error"] != nil:
			if e["status"] != "FAILED" || wrote {
				t.Errorf("id %v was answered with an error (%s) but is recorded %v, row written %v", id, at.AsJSON(answer["error"]), e["status"], wrote)
			}
			v.failed++
		case got:
			// A tool error (its read failed with the connection) is a
			// result too, and writes nothing.
			toolError := at.Dig(answer, "result", "isError") == true
			if e["status"] != "SUCCEEDED" || !jsonEqualValues(e["output"], answer["result"]) || wrote == toolError {
				t.Errorf("id %v was answered with a result (isError %v) but is recorded %v (row written %v)", id, toolError, e["status"], wrote)
			}
			v.succeeded++
		default:
			if wrote != (e["status"] == "SUCCEEDED") {
				t.Errorf("unanswered id %v is %v but its row written is %v", id, e["status"], wrote)
			}
		}
	}
	return v
}
