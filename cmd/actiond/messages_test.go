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
// format, streaming included, and scripts its turns: while the
// conversation has fewer tool results than it has steps, it asks for the
// next step's tool, with that step's input; then it answers with the last
// tool result's text.
type messagesAPI struct {
	server *httptest.Server
	steps  []toolStep

	mu      sync.Mutex
	results []string        // the tool results Claude Code sent back, in order
	seen    map[string]bool // their tool_use IDs
	uses    int             // tool uses asked for, which number their IDs
}

// toolStep is one tool call the fake model asks for.
type toolStep struct {
	tool  string
	input map[string]any
}

func newMessagesAPI(t *testing.T, tool string, input map[string]any) *messagesAPI {
	return newScriptedAPI(t, toolStep{tool: tool, input: input})
}

// newScriptedAPI asks for each step's tool in turn.
func newScriptedAPI(t *testing.T, steps ...toolStep) *messagesAPI {
	api := &messagesAPI{steps: steps}
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
	done, result, answered := api.collect(request.Messages)
	if done >= len(api.steps) {
		api.reply(w, request.Stream, "text", "The tool said: "+result, done)
		return
	}
	next := api.steps[done]
	offered := false
	for _, tool := range request.Tools {
		offered = offered || tool.Name == next.tool
	}
	if !offered {
		if answered {
			api.reply(w, request.Stream, "text", "The tool said: "+result, done)
			return
		}
		var names []string
		for _, tool := range request.Tools {
			names = append(names, tool.Name)
		}
		api.reply(w, request.Stream, "text", "The tool "+next.tool+" is not available; offered: "+strings.Join(names, ", "), done)
		return
	}
	api.reply(w, request.Stream, "tool_use", "", done)
}

// collect reads the conversation's tool results (Claude Code may send a
// run of tool turns as one assistant message and one user message): how
// many there are, the text of the last, and whether there is one. It keeps
// each it has not seen before, by tool_use ID.
func (api *messagesAPI) collect(messages []message) (done int, last string, answered bool) {
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.seen == nil {
		api.seen = map[string]bool{}
	}
	for _, m := range messages {
		var blocks []block
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue // a plain string
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				continue
			}
			done++
			last, answered = resultText(b), true
			if !api.seen[b.ToolUseID] {
				api.seen[b.ToolUseID] = true
				api.results = append(api.results, last)
			}
		}
	}
	return done, last, answered
}

// resultText is a tool result's text, led by "error: " for a tool error.
func resultText(b block) string {
	var text string
	if json.Unmarshal(b.Content, &text) == nil {
		return text
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
		return "error: " + strings.Join(all, "\n")
	}
	return strings.Join(all, "\n")
}

// reply answers with text, or for kind tool_use with step's tool call.
func (api *messagesAPI) reply(w http.ResponseWriter, stream bool, kind, text string, step int) {
	content := map[string]any{"type": "text", "text": text}
	stop := "end_turn"
	var use toolStep
	var id string
	if kind == "tool_use" {
		api.mu.Lock()
		api.uses++
		id = fmt.Sprintf("toolu_%02d", api.uses)
		api.mu.Unlock()
		use = api.steps[step]
		content = map[string]any{"type": "tool_use", "id": id, "name": use.tool, "input": use.input}
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
		input, _ := json.Marshal(use.input)
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": use.tool, "input": map[string]any{}}})
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
