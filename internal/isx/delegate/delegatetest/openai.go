package delegatetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// OpenAI is the fake Responses API (POST /v1/responses, streamed).
type OpenAI struct{ server }

// StartOpenAI serves the fake until Close.
func StartOpenAI(script Script) (*OpenAI, error) {
	o := &OpenAI{server{Script: script, Usage: [4]int64{900, 60, 200, 0}}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", o.responses)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // nothing to read
		writeJSON(w, http.StatusNotFound, openAIError("no such endpoint in the fake: "+r.URL.Path))
	})
	return o, o.start(mux)
}

func openAIError(message string) map[string]any {
	return map[string]any{"error": map[string]any{"message": message, "type": "invalid_request_error", "code": "model_not_found"}}
}

// responsesRequest is what the fake reads of a request.
type responsesRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Input  []json.RawMessage `json:"input"`
	Tools  []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

type inputItem struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (o *OpenAI) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, openAIError(err.Error()))
		return
	}
	call := Call{Path: r.URL.Path, Model: req.Model, Stream: req.Stream, Body: body, Headers: r.Header.Clone()}
	shell := ""
	for _, t := range req.Tools {
		name := t.Name
		if name == "" {
			name = t.Type
		}
		call.Tools = append(call.Tools, name)
		switch name {
		case "shell", "shell_command", "exec_command", "local_shell":
			if shell == "" {
				shell = name
			}
		}
	}
	o.record(call)
	if o.denied(req.Model) {
		writeJSON(w, http.StatusNotFound, openAIError("The model `"+req.Model+"` does not exist or you do not have access to it."))
		return
	}
	prompt, afterTool := lastInput(req.Input)
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	seq := 0
	send := func(event string, data map[string]any) {
		data["type"] = event
		data["sequence_number"] = seq
		seq++
		raw, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, raw)
		if flusher != nil {
			flusher.Flush()
		}
	}
	response := map[string]any{"id": "resp_fake", "object": "response", "status": "in_progress", "model": req.Model, "output": []any{}}
	send("response.created", map[string]any{"response": response})
	var item map[string]any
	if cmd := ""; !afterTool && shell != "" && o.Script.Command != nil {
		cmd = o.Script.Command(prompt)
		if cmd != "" {
			item = shellCall(shell, cmd)
		}
	}
	if item == nil {
		text := o.Script.Report(prompt)
		item = map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
		send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "in_progress", "content": []any{}}})
		send("response.output_text.delta", map[string]any{"output_index": 0, "content_index": 0, "item_id": "msg_fake", "delta": text})
	} else {
		send("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	}
	send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	response["status"], response["output"] = "completed", []any{item}
	response["usage"] = map[string]any{
		"input_tokens": o.Usage[0], "input_tokens_details": map[string]any{"cached_tokens": o.Usage[2]},
		"output_tokens": o.Usage[1], "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": o.Usage[0] + o.Usage[1],
	}
	send("response.completed", map[string]any{"response": response})
}

// shellCall is a call of Codex's shell tool, in the form its name takes.
func shellCall(tool, cmd string) map[string]any {
	var args map[string]any
	switch tool {
	case "shell":
		args = map[string]any{"command": []string{"bash", "-lc", cmd}}
	case "local_shell":
		return map[string]any{"type": "local_shell_call", "id": "lsh_fake", "call_id": "call_fake1", "status": "completed",
			"action": map[string]any{"type": "exec", "command": []string{"bash", "-lc", cmd}}}
	case "exec_command":
		args = map[string]any{"cmd": cmd}
	default:
		args = map[string]any{"command": cmd}
	}
	raw, _ := json.Marshal(args)
	return map[string]any{"type": "function_call", "id": "fc_fake", "call_id": "call_fake1", "name": tool, "arguments": string(raw), "status": "completed"}
}

// lastInput is the text of the latest user message, and whether a tool's
// output came after it.
func lastInput(input []json.RawMessage) (string, bool) {
	afterTool := false
	for i := len(input) - 1; i >= 0; i-- {
		var it inputItem
		if json.Unmarshal(input[i], &it) != nil {
			continue
		}
		switch {
		case strings.HasSuffix(it.Type, "_call_output"):
			afterTool = true
		case it.Role == "user":
			var texts []string
			for _, c := range it.Content {
				if c.Type == "input_text" && !strings.HasPrefix(c.Text, "<") {
					texts = append(texts, c.Text)
				}
			}
			if len(texts) > 0 {
				return strings.Join(texts, "\n"), afterTool
			}
		}
	}
	return "", afterTool
}
