// Package modeltest is a model provider for tests: a local HTTP server
// speaking the real wire formats of the Anthropic Messages API
// (POST /v1/messages) and of an OpenAI-compatible chat completions API
// (POST /v1/chat/completions), both streaming as the real ones stream,
// whose answers a script decides. A model's provider is the one part of a
// callable agent that cannot run here; everything else a test runs is real.
package modeltest

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/clock"
)

// Exchange is one request the server received, decoded into the form
// both APIs share.
type Exchange struct {
	// API is "anthropic" or "openai".
	API    string
	Model  string
	System string
	// Messages are the conversation so far, oldest first.
	Messages []Message
	// Tools are the names of the tools offered.
	Tools     []string
	MaxTokens int
	// Key is the API key the request carried.
	Key string
	At  time.Time
}

// Message is one turn: text, tool uses (assistant) and tool results (user).
type Message struct {
	Role        string
	Text        string
	ToolUses    []ToolUse
	ToolResults []ToolResult
}

// ToolUse is a tool the model asked for.
type ToolUse struct {
	ID    string
	Name  string
	Input map[string]any
}

// ToolResult is what a tool answered.
type ToolResult struct {
	ToolUseID string
	Content   string
	IsError   bool
}

// Input is the agent's input: the JSON its first message carries after
// "Input:".
func (x Exchange) Input() map[string]any {
	if len(x.Messages) == 0 {
		return nil
	}
	text := strings.TrimSpace(strings.TrimPrefix(x.Messages[0].Text, "Input:"))
	var input map[string]any
	json.Unmarshal([]byte(text), &input)
	return input
}

// Turn is how many assistant turns came before this exchange, plus one.
func (x Exchange) Turn() int {
	n := 1
	for _, m := range x.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// LastResults are the tool results of the last user message.
func (x Exchange) LastResults() []ToolResult {
	if len(x.Messages) == 0 {
		return nil
	}
	return x.Messages[len(x.Messages)-1].ToolResults
}

// Reply is what a script answers.
type Reply struct {
	// Text is the answer's text.
	Text string
	// ToolUses ask for tools; their IDs are made up when empty.
	ToolUses []ToolUse
	// StopReason overrides end_turn (or tool_use when there are tool uses).
	StopReason string
	// Status, when set, answers with an HTTP error of that status and an
	// error of type ErrorType (529 overloaded_error, 400 invalid_request_error…).
	Status    int
	ErrorType string
	// StreamError ends the stream with an error event of this type after
	// the text started.
	StreamError string
	// Delay waits this long before answering, or until the request ends.
	Delay time.Duration
	// Release, when set, is waited for before answering, or until the
	// request ends.
	Release <-chan struct{}
	// Chunk is the size of the text's deltas (default 16 bytes).
	Chunk int
	// Events, when set, are sent after message_start instead of the
	// answer's blocks, each as the event its "type" names: a provider
	// that misbehaves (Messages API only).
	Events []map[string]any
}

// Script decides each exchange's answer.
type Script func(Exchange) Reply

// Server is a running fake provider.
type Server struct {
	// URL is http://127.0.0.1:<port>: the Messages API's base URL; the chat
	// API's is URL + "/v1".
	URL string

	script Script
	key    string
	clock  clock.Clock
	http   *http.Server
	done   chan struct{}

	mu        sync.Mutex
	exchanges []Exchange
	waiting   chan struct{}
	ids       int
}

// Options configure a server.
type Options struct {
	// Key, when set, is the API key every request must carry (x-api-key,
	// or Authorization: Bearer); a request without it gets 401.
	Key string
	// Clock times Delay; nil is the real clock.
	Clock clock.Clock
	// Addr is where to listen; "" is 127.0.0.1 on a free port.
	Addr string
}

// Start serves script on loopback until Close.
func Start(script Script, opts Options) (*Server, error) {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("modeltest: listen: %w", err)
	}
	s := &Server{URL: "http://" + listener.Addr().String(), script: script, key: opts.Key, clock: opts.Clock,
		done: make(chan struct{}), waiting: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		s.http.Serve(listener)
	}()
	return s, nil
}

// Close stops the server, ending every answer in progress.
func (s *Server) Close() {
	s.http.Close()
	<-s.done
}

// Exchanges lists what the server received, oldest first.
func (s *Server) Exchanges() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exchange(nil), s.exchanges...)
}

// Received returns a channel closed at the next exchange received: to wait
// for one without polling.
func (s *Server) Received() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *Server) note(x Exchange) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exchanges = append(s.exchanges, x)
	close(s.waiting)
	s.waiting = make(chan struct{})
}

func (s *Server) nextID(prefix string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids++
	return fmt.Sprintf("%s_%06d", prefix, s.ids)
}

func (s *Server) authorized(r *http.Request) (string, bool) {
	key := r.Header.Get("x-api-key")
	if key == "" {
		key = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	return key, s.key == "" || subtle.ConstantTimeCompare([]byte(key), []byte(s.key)) == 1
}

// wait holds the answer for the reply's delay or release.
func (s *Server) wait(ctx context.Context, reply Reply) bool {
	if reply.Delay > 0 {
		select {
		case <-ctx.Done():
			return false
		case <-s.clock.After(reply.Delay):
		}
	}
	if reply.Release != nil {
		select {
		case <-ctx.Done():
			return false
		case <-reply.Release:
		}
	}
	return true
}

// stream writes server-sent events, flushing each.
type stream struct {
	w http.ResponseWriter
}

func (st stream) event(name string, data any) {
	b, _ := json.Marshal(data)
	if name != "" {
		fmt.Fprintf(st.w, "event: %s\n", name)
	}
	fmt.Fprintf(st.w, "data: %s\n\n", b)
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (st stream) raw(data string) {
	fmt.Fprintf(st.w, "data: %s\n\n", data)
	if f, ok := st.w.(http.Flusher); ok {
		f.Flush()
	}
}

func startStream(w http.ResponseWriter) stream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return stream{w: w}
}

// chunks splits s into pieces of at most n bytes, as a stream delivers text.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
