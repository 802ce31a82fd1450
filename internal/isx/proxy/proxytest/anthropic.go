// Package proxytest gives the host proxy's tests and benchmark the
// upstreams that cannot run here: a fake Anthropic Messages API speaking
// the real wire format (JSON and SSE streams), a git server (the real
// git http-backend), a download server and a WebSocket echo server, each
// on host loopback, plus the client program tests run inside instances.
package proxytest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Usage is what the fake reports for one call.
type Usage struct {
	Input, Output, CacheRead, CacheCreation int64
}

// Reply says how the fake answers one call.
type Reply struct {
	Usage Usage
	// Hold, when not nil, keeps a streamed answer open after its first
	// event until Hold is closed.
	Hold chan struct{}
	// Stall sends the headers (and a stream's first event) and then
	// nothing, until the client goes away.
	Stall bool
	// Malformed answers 200 with a body that is not what it claims.
	Malformed bool
	// Text is the answer's text (default "Hello from the fake.").
	Text string
}

// Call is one call the fake received.
type Call struct {
	Received, Finished time.Time
	// APIKey and Authorization are the credentials it arrived with.
	APIKey, Authorization string
	Beta                  string
	Stream                bool
	Body                  []byte
	// Sent is the usage the fake reported (its final values).
	Sent Usage
	// Headers is every header it arrived with.
	Headers http.Header
}

// Anthropic is a fake of the Messages API on loopback.
type Anthropic struct {
	URL string
	// Forget keeps no record of calls (a benchmark's millions); Calls and
	// Sum are then empty.
	Forget bool
	// Reply chooses the answer to the n-th call (from 0), given the call;
	// nil answers every call with DefaultUsage(n).
	Reply func(n int, c Call) Reply

	server *http.Server
	mu     sync.Mutex
	calls  []Call
	wg     sync.WaitGroup
	done   chan struct{}
}

// DefaultUsage is the usage of the n-th call when Reply is nil: distinct
// for every call and field, so sums tell calls apart.
func DefaultUsage(n int) Usage {
	return Usage{Input: 100 + int64(n), Output: 20 + int64(n), CacheRead: 7 + int64(n), CacheCreation: 3 + int64(n)}
}

// StartAnthropic serves the fake until Close.
func StartAnthropic() (*Anthropic, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxytest: listening for the fake Anthropic API: %w", err)
	}
	a := &Anthropic{URL: "http://" + l.Addr().String(), done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", a.messages)
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[{"type":"model","id":"claude-test"}],"has_more":false}`) //nolint:errcheck // test server
	})
	a.server = &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	a.wg.Go(func() { a.server.Serve(l) }) //nolint:errcheck // ends at Close
	return a, nil
}

// Close stops the fake, ending held and stalled answers.
func (a *Anthropic) Close() {
	close(a.done)
	a.server.Close()
	a.wg.Wait()
}

// Calls are the calls received so far.
func (a *Anthropic) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.calls...)
}

// Sum is the usage the fake reported over all calls.
func (a *Anthropic) Sum() Usage {
	var u Usage
	for _, c := range a.Calls() {
		u.Input += c.Sent.Input
		u.Output += c.Sent.Output
		u.CacheRead += c.Sent.CacheRead
		u.CacheCreation += c.Sent.CacheCreation
	}
	return u
}

func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request) {
	call := Call{Received: time.Now(), APIKey: r.Header.Get("X-Api-Key"), Authorization: r.Header.Get("Authorization"),
		Beta: r.Header.Get("Anthropic-Beta"), Headers: r.Header.Clone()}
	body, _ := io.ReadAll(r.Body)
	call.Body = body
	var req struct {
		Stream bool `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"body is not JSON"}}`) //nolint:errcheck // test server
		return
	}
	call.Stream = req.Stream
	a.mu.Lock()
	n := len(a.calls)
	if a.Forget {
		n = -1
	} else {
		a.calls = append(a.calls, call)
	}
	a.mu.Unlock()
	reply := Reply{Usage: DefaultUsage(max(n, 0))}
	if a.Reply != nil {
		reply = a.Reply(n, call)
	}
	if reply.Text == "" {
		reply.Text = "Hello from the fake."
	}
	if !reply.Malformed && !reply.Stall {
		a.record(n, func(c *Call) { c.Sent = reply.Usage })
	}
	if req.Stream {
		a.stream(w, r, reply)
	} else {
		a.json(w, r, reply)
	}
	a.record(n, func(c *Call) { c.Finished = time.Now() })
}

func (a *Anthropic) record(n int, change func(*Call)) {
	if n < 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	change(&a.calls[n])
}

func usageJSON(u Usage) map[string]int64 {
	return map[string]int64{"input_tokens": u.Input, "output_tokens": u.Output, "cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheCreation}
}

func (a *Anthropic) json(w http.ResponseWriter, r *http.Request, reply Reply) {
	w.Header().Set("Content-Type", "application/json")
	if reply.Malformed {
		io.WriteString(w, `{"id":"msg_1","type":"message","usage":{"input_tokens": 12, `) //nolint:errcheck // test server
		return
	}
	if reply.Stall {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		a.wait(r, nil)
		return
	}
	json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // test server
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-test",
		"content":     []map[string]string{{"type": "text", "text": reply.Text}},
		"stop_reason": "end_turn", "stop_sequence": nil, "usage": usageJSON(reply.Usage),
	})
}

// stream answers as the Messages API streams: message_start with the
// input usage and one output token, the text, then message_delta whose
// usage is cumulative (every field, as the API now sends them).
func (a *Anthropic) stream(w http.ResponseWriter, r *http.Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher := w.(http.Flusher)
	event := func(name string, data any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
		flusher.Flush()
	}
	if reply.Malformed {
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\": 9\n\ndata: [not json]\n\n") //nolint:errcheck // test server
		return
	}
	start := reply.Usage
	start.Output = 1
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-test", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usageJSON(start),
	}})
	if reply.Stall {
		a.wait(r, nil)
		return
	}
	if reply.Hold != nil && !a.wait(r, reply.Hold) {
		return
	}
	event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]string{"type": "text", "text": ""}})
	event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]string{"type": "text_delta", "text": reply.Text}})
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": usageJSON(reply.Usage)})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// wait blocks until release closes (true), or the client or the fake
// goes away (false).
func (a *Anthropic) wait(r *http.Request, release chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-r.Context().Done():
	case <-a.done:
	}
	return false
}
