// Package delegatetest gives delegation tests the model providers that
// cannot run here: a fake Anthropic Messages API and a fake OpenAI
// Responses API on host loopback, speaking the real wire formats
// (streaming included), scripted to have the agent run one shell command
// (edit a file in its checkout) and then report. They record every call,
// so a test can see the model asked for, the tools offered and the whole
// conversation a resumed session sends.
package delegatetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// Script says what the fake agent does: the command its first turn runs
// (Bash for Claude, the shell tool for Codex), and the report it ends with.
// Command sees the prompt of the conversation's latest user message.
type Script struct {
	Command func(prompt string) string
	Report  func(prompt string) string
	// Hold, when it says so for a prompt, keeps the call open with no
	// answer until its client goes away: an agent waiting on its model.
	Hold func(prompt string) bool
	// Tool, when set, decides every turn instead of Command: it sees the
	// prompt, the texts of the tool results since it (oldest first) and
	// the tools on offer, and names a tool to call with its input, or ""
	// to end with the report. An MCP client's tools are driven this way.
	Tool func(prompt string, results []string, offered []string) (string, map[string]any)
}

// Call is one model call a fake received.
type Call struct {
	Path   string
	Model  string
	Stream bool
	Tools  []string // names of the tools offered
	Body   []byte
	// Headers it arrived with (the proxy's injected credential is here).
	Headers http.Header
}

// server is what both fakes share.
type server struct {
	URL      string
	Script   Script
	Denied   map[string]bool // models the account may not use
	Usage    [4]int64        // input, output, cache read, cache creation of every reply
	mu       sync.Mutex
	calls    []Call
	http     *http.Server
	listener net.Listener
}

func (s *server) start(h http.Handler) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("delegatetest: listening: %w", err)
	}
	s.listener, s.URL = l, "http://"+l.Addr().String()
	s.http = &http.Server{Handler: h}
	go s.http.Serve(l) //nolint:errcheck // ends with Close
	return nil
}

// Close stops the fake.
func (s *server) Close() { s.http.Close() }

// Calls are the calls received so far.
func (s *server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

func (s *server) record(c Call) {
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
}

func (s *server) denied(model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Denied[model]
}

// Deny makes the account refuse a model.
func (s *server) Deny(model string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Denied == nil {
		s.Denied = map[string]bool{}
	}
	s.Denied[model] = true
}

// Anthropic is the fake Messages API.
type Anthropic struct{ server }

// StartAnthropic serves the fake until Close.
func StartAnthropic(script Script) (*Anthropic, error) {
	a := &Anthropic{server{Script: script, Usage: [4]int64{1200, 80, 300, 40}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", a.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // the count is made up
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 100})
	})
	mux.HandleFunc("GET /v1/models/{model}", a.model)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // nothing to read
		writeJSON(w, http.StatusNotFound, anthropicError("not_found_error", "no such endpoint in the fake: "+r.URL.Path))
	})
	return a, a.start(mux)
}

func anthropicError(kind, message string) map[string]any {
	return map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": message}}
}

func (a *Anthropic) model(w http.ResponseWriter, r *http.Request) {
	model := r.PathValue("model")
	a.record(Call{Path: r.URL.Path, Model: model, Headers: r.Header.Clone()})
	if a.denied(model) {
		writeJSON(w, http.StatusNotFound, anthropicError("not_found_error", "model: "+model))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"type": "model", "id": model, "display_name": model})
}

// messagesRequest is what the fake reads of a request.
type messagesRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// block is one content block of a message.
type block struct {
	Type    string          `json:"type"`
	Text    string          `json:"text,omitempty"`
	Content json.RawMessage `json:"content,omitempty"`
}

func blocks(raw json.RawMessage) []block {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []block{{Type: "text", Text: text}}
	}
	var out []block
	json.Unmarshal(raw, &out) //nolint:errcheck // anything else has no blocks
	return out
}

func (a *Anthropic) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, anthropicError("invalid_request_error", err.Error()))
		return
	}
	call := Call{Path: r.URL.Path, Model: req.Model, Stream: req.Stream, Body: body, Headers: r.Header.Clone()}
	for _, t := range req.Tools {
		call.Tools = append(call.Tools, t.Name)
	}
	a.record(call)
	if a.denied(req.Model) {
		writeJSON(w, http.StatusNotFound, anthropicError("not_found_error", "model: "+req.Model))
		return
	}
	if prompt, _ := lastPrompt(req); a.Script.Hold != nil && a.Script.Hold(prompt) {
		<-r.Context().Done()
		return
	}
	reply := a.decide(req, call.Tools)
	if req.Stream {
		a.stream(w, req.Model, reply)
		return
	}
	writeJSON(w, http.StatusOK, a.message(req.Model, reply))
}

// turn is what the fake answers: text, or a call of the shell tool (Bash
// for Claude Code, bash for Pi and opencode) with an id of its own: an
// agent pairs each result with its call by id.
type turn struct {
	text    string
	command string
	tool    string
	id      string
	// input is a scripted tool's input (Script.Tool); a shell call's is
	// its command.
	input map[string]any
}

// toolInput is what the turn's tool call sends.
func (t turn) toolInput() map[string]any {
	if t.input != nil {
		return t.input
	}
	return map[string]any{"command": t.command, "description": "run the scripted command"}
}

// calls reports whether the turn calls a tool.
func (t turn) calls() bool { return t.command != "" || t.input != nil }

// toolResults are the texts of the tool results after the conversation's
// latest prompt, oldest first.
func toolResults(req messagesRequest) []string {
	var out []string
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		var texts []string
		prompt := false
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "tool_result":
				texts = append(texts, resultText(b.Content))
			case "text":
				if !strings.HasPrefix(b.Text, "<system-reminder>") {
					prompt = true
				}
			}
		}
		if prompt && len(texts) == 0 {
			break
		}
		out = append(texts, out...)
	}
	return out
}

// resultText is a tool result's content as text.
func resultText(raw json.RawMessage) string {
	var parts []string
	for _, b := range blocks(raw) {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decide answers the conversation: a tool result in the last message
// means the command ran, so the agent reports; a prompt with Bash on offer
// runs the script's command; anything else (a title, a summary) is text.
func (a *Anthropic) decide(req messagesRequest, tools []string) turn {
	prompt, afterTool := lastPrompt(req)
	shell := ""
	for _, t := range tools {
		if t == "Bash" || t == "bash" {
			shell = t
		}
	}
	if a.Script.Tool != nil {
		if name, input := a.Script.Tool(prompt, toolResults(req), tools); name != "" {
			return turn{tool: name, input: input, id: fmt.Sprintf("toolu_fake%d", len(a.Calls()))}
		}
		return turn{text: a.Script.Report(prompt)}
	}
	switch {
	case afterTool:
		return turn{text: a.Script.Report(prompt)}
	case shell != "" && a.Script.Command != nil:
		if cmd := a.Script.Command(prompt); cmd != "" {
			return turn{command: cmd, tool: shell, id: fmt.Sprintf("toolu_fake%d", len(a.Calls()))}
		}
	}
	return turn{text: a.Script.Report(prompt)}
}

// lastPrompt is the text of the latest user message that is not a tool
// result, and whether the conversation's last message is a tool result.
func lastPrompt(req messagesRequest) (string, bool) {
	afterTool := false
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		texts, results := []string{}, 0
		for _, b := range blocks(m.Content) {
			switch b.Type {
			case "text":
				if !strings.HasPrefix(b.Text, "<system-reminder>") {
					texts = append(texts, b.Text)
				}
			case "tool_result":
				results++
			}
		}
		if i == len(req.Messages)-1 && results > 0 {
			afterTool = true
		}
		if len(texts) > 0 && results == 0 {
			return strings.Join(texts, "\n"), afterTool
		}
	}
	return "", afterTool
}

func (a *Anthropic) usage(output int64) map[string]any {
	return map[string]any{
		"input_tokens": a.Usage[0], "output_tokens": output,
		"cache_read_input_tokens": a.Usage[2], "cache_creation_input_tokens": a.Usage[3],
	}
}

func (a *Anthropic) message(model string, t turn) map[string]any {
	content, stop := []any{map[string]any{"type": "text", "text": t.text}}, "end_turn"
	if t.calls() {
		content = []any{map[string]any{"type": "tool_use", "id": t.id, "name": t.tool, "input": t.toolInput()}}
		stop = "tool_use"
	}
	return map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": a.usage(a.Usage[1])}
}

func (a *Anthropic) stream(w http.ResponseWriter, model string, t turn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	send := func(event string, data map[string]any) {
		data["type"] = event
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw)
		if flusher != nil {
			flusher.Flush()
		}
	}
	send("message_start", map[string]any{"message": map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": a.usage(1)}})
	stop := "end_turn"
	if t.calls() {
		stop = "tool_use"
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "tool_use", "id": t.id, "name": t.tool, "input": map[string]any{}}})
		input, _ := json.Marshal(t.toolInput())
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": t.text}})
	}
	send("content_block_stop", map[string]any{"index": 0})
	send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": a.Usage[1]}})
	send("message_stop", map[string]any{})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client may be gone
}
