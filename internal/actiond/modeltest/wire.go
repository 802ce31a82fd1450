package modeltest

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The Anthropic Messages API, as a client sees it: a JSON error body for a
// refused request, or an event stream of message_start, per content block
// content_block_start, content_block_delta and content_block_stop, then
// message_delta and message_stop, with ping events between.

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	key, ok := s.authorized(r)
	if !ok {
		writeAnthropicError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	var req struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		System    json.RawMessage `json:"system"`
		Stream    bool            `json:"stream"`
		Messages  []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" || req.MaxTokens < 1 || !req.Stream {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "the request needs model, max_tokens and stream: true")
		return
	}
	x := Exchange{API: "anthropic", Model: req.Model, MaxTokens: req.MaxTokens, Key: key, At: s.clock.Now()}
	json.Unmarshal(req.System, &x.System)
	for _, t := range req.Tools {
		x.Tools = append(x.Tools, t.Name)
	}
	for _, m := range req.Messages {
		message := Message{Role: m.Role}
		var blocks []anthropicBlock
		var text string
		if json.Unmarshal(m.Content, &text) == nil {
			message.Text = text
		} else if err := json.Unmarshal(m.Content, &blocks); err != nil {
			writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "messages: content must be a string or a list of blocks")
			return
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				message.Text += b.Text
			case "tool_use":
				var input map[string]any
				json.Unmarshal(b.Input, &input)
				message.ToolUses = append(message.ToolUses, ToolUse{ID: b.ID, Name: b.Name, Input: input})
			case "tool_result":
				var content string
				json.Unmarshal(b.Content, &content)
				message.ToolResults = append(message.ToolResults, ToolResult{ToolUseID: b.ToolUseID, Content: content, IsError: b.IsError})
			}
		}
		x.Messages = append(x.Messages, message)
	}
	s.note(x)
	reply := s.script(x)
	if !s.wait(r.Context(), reply) {
		return
	}
	if reply.Status != 0 {
		kind := reply.ErrorType
		if kind == "" {
			kind = "api_error"
		}
		writeAnthropicError(w, reply.Status, kind, "scripted failure")
		return
	}
	st := startStream(w)
	st.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": s.nextID("msg"), "type": "message", "role": "assistant", "content": []any{}, "model": req.Model,
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": 10 * len(req.Messages), "output_tokens": 1}}})
	st.event("ping", map[string]any{"type": "ping"})
	if reply.Events != nil {
		for _, e := range reply.Events {
			st.event(e["type"].(string), e)
		}
		return
	}
	chunk := reply.Chunk
	if chunk <= 0 {
		chunk = 16
	}
	index := 0
	if reply.Text != "" || len(reply.ToolUses) == 0 {
		st.event("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range chunks(reply.Text, chunk) {
			st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		if reply.StreamError != "" {
			st.event("error", map[string]any{"type": "error", "error": map[string]any{"type": reply.StreamError, "message": "scripted failure mid-stream"}})
			return
		}
		st.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, use := range reply.ToolUses {
		id := use.ID
		if id == "" {
			id = s.nextID("toolu")
		}
		st.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": use.Name, "input": map[string]any{}}})
		input, _ := json.Marshal(orEmpty(use.Input))
		for _, piece := range chunks(string(input), 8) {
			st.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
		}
		st.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	st.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stopReason(reply), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 1 + len(reply.Text)/4}})
	st.event("message_stop", map[string]any{"type": "message_stop"})
}

func stopReason(reply Reply) string {
	switch {
	case reply.StopReason != "":
		return reply.StopReason
	case len(reply.ToolUses) > 0:
		return "tool_use"
	}
	return "end_turn"
}

func writeAnthropicError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": kind, "message": message}})
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// An OpenAI-compatible chat completions API: a JSON error body, or data:
// chunks of choices[0].delta (content, tool_calls with index, id and
// function name and arguments in pieces), a chunk with finish_reason, a
// chunk with usage, and data: [DONE].

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	key, ok := s.authorized(r)
	if !ok {
		writeOpenAIError(w, http.StatusUnauthorized, "invalid_api_key", "Incorrect API key provided")
		return
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		Messages  []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model == "" || !req.Stream {
		writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", "the request needs model and stream: true")
		return
	}
	x := Exchange{API: "openai", Model: req.Model, MaxTokens: req.MaxTokens, Key: key, At: s.clock.Now()}
	for _, t := range req.Tools {
		x.Tools = append(x.Tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		switch m.Role {
		case "system":
			x.System = content
			continue
		case "tool":
			result := ToolResult{ToolUseID: m.ToolCallID, Content: strings.TrimPrefix(content, "Error: "), IsError: strings.HasPrefix(content, "Error: ")}
			if n := len(x.Messages); n > 0 && x.Messages[n-1].Role == "user" && len(x.Messages[n-1].ToolResults) > 0 {
				x.Messages[n-1].ToolResults = append(x.Messages[n-1].ToolResults, result)
			} else {
				x.Messages = append(x.Messages, Message{Role: "user", ToolResults: []ToolResult{result}})
			}
			continue
		}
		message := Message{Role: m.Role, Text: content}
		for _, call := range m.ToolCalls {
			var input map[string]any
			json.Unmarshal([]byte(call.Function.Arguments), &input)
			message.ToolUses = append(message.ToolUses, ToolUse{ID: call.ID, Name: call.Function.Name, Input: input})
		}
		x.Messages = append(x.Messages, message)
	}
	s.note(x)
	reply := s.script(x)
	if !s.wait(r.Context(), reply) {
		return
	}
	if reply.Status != 0 {
		kind := reply.ErrorType
		if kind == "" {
			kind = "server_error"
		}
		writeOpenAIError(w, reply.Status, kind, "scripted failure")
		return
	}
	id := s.nextID("chatcmpl")
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	st := startStream(w)
	st.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range chunks(reply.Text, 16) {
		st.event("", chunk(map[string]any{"content": piece}, nil))
	}
	if reply.StreamError != "" {
		st.event("", map[string]any{"error": map[string]any{"message": "scripted failure mid-stream", "type": reply.StreamError}})
		return
	}
	for i, use := range reply.ToolUses {
		callID := use.ID
		if callID == "" {
			callID = s.nextID("call")
		}
		st.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID, "type": "function",
			"function": map[string]any{"name": use.Name, "arguments": ""}}}}, nil))
		input, _ := json.Marshal(orEmpty(use.Input))
		for _, piece := range chunks(string(input), 8) {
			st.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, nil))
		}
	}
	finish := "stop"
	switch stopReason(reply) {
	case "tool_use":
		finish = "tool_calls"
	case "max_tokens":
		finish = "length"
	case "refusal":
		finish = "content_filter"
	}
	st.event("", chunk(map[string]any{}, finish))
	st.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "model": req.Model, "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 10 * len(req.Messages), "completion_tokens": 1 + len(reply.Text)/4}})
	st.raw("[DONE]")
}

func writeOpenAIError(w http.ResponseWriter, status int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": kind, "code": kind}})
}
