package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// messagesAPI is a local stand-in for the model provider's Messages API,
// the one part of the run that cannot be real here. It speaks the real wire
// format, streaming included, and scripts one turn: while the conversation
// has no tool result it asks for the tool, with the input given; then it
// answers with the tool result's text.
type messagesAPI struct {
	server *httptest.Server
	tool   string
	input  map[string]any

	mu      sync.Mutex
	results []string // the tool results Claude Code sent back
}

func newMessagesAPI(t *testing.T, tool string, input map[string]any) *messagesAPI {
	api := &messagesAPI{tool: tool, input: input}
	api.server = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.server.Close)
	return api
}

// toolResults are the results of the tool calls so far.
func (api *messagesAPI) toolResults() []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	return append([]string{}, api.results...)
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (api *messagesAPI) serve(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
		// count_tokens and anything else: a small valid answer.
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens": 10}`)
		return
	}
	var request struct {
		Stream   bool      `json:"stream"`
		Messages []message `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &request); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	offered := false
	for _, tool := range request.Tools {
		offered = offered || tool.Name == api.tool
	}
	result, answered := api.lastToolResult(request.Messages)
	switch {
	case answered:
		api.mu.Lock()
		api.results = append(api.results, result)
		api.mu.Unlock()
		api.reply(w, request.Stream, "text", "The tool said: "+result)
	case offered:
		api.reply(w, request.Stream, "tool_use", "")
	default:
		var names []string
		for _, tool := range request.Tools {
			names = append(names, tool.Name)
		}
		api.reply(w, request.Stream, "text", "The tool "+api.tool+" is not available; offered: "+strings.Join(names, ", "))
	}
}

// lastToolResult is the text of the latest tool result in the
// conversation: Claude Code may add a message of its own after it.
func (api *messagesAPI) lastToolResult(messages []message) (string, bool) {
	for i := len(messages) - 1; i >= 0; i-- {
		if text, ok := toolResultOf(messages[i]); ok {
			return text, true
		}
	}
	return "", false
}

func toolResultOf(m message) (string, bool) {
	var blocks []block
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return "", false // a plain string
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		var text string
		if json.Unmarshal(b.Content, &text) == nil {
			return text, true
		}
		var parts []struct {
			Text string `json:"text"`
		}
		json.Unmarshal(b.Content, &parts)
		var all []string
		for _, p := range parts {
			all = append(all, p.Text)
		}
		if b.IsError {
			return "error: " + strings.Join(all, "\n"), true
		}
		return strings.Join(all, "\n"), true
	}
	return "", false
}

func (api *messagesAPI) reply(w http.ResponseWriter, stream bool, kind, text string) {
	content := map[string]any{"type": "text", "text": text}
	stop := "end_turn"
	if kind == "tool_use" {
		content = map[string]any{"type": "tool_use", "id": "toolu_01", "name": api.tool, "input": api.input}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
			"content": []any{content}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	event := func(name string, data map[string]any) {
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, raw)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_01", "type": "message", "role": "assistant",
		"model": "claude-test", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}})
	if kind == "tool_use" {
		input, _ := json.Marshal(api.input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": "toolu_01", "name": api.tool, "input": map[string]any{}}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": text}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
}
