package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
)

// openAI speaks an OpenAI-compatible chat completions API
// (POST <base>/chat/completions), streaming: OpenAI's own, and the many
// servers that copy it.
type openAI struct {
	baseURL string
	key     string
	http    *http.Client
}

type openAIToolCall struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments,omitempty"`
	} `json:"function"`
}

type openAIMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description,omitempty"`
		Parameters  map[string]any `json:"parameters"`
	} `json:"function"`
}

type openAIRequest struct {
	Model         string          `json:"model"`
	MaxTokens     int             `json:"max_tokens,omitempty"`
	Messages      []openAIMessage `json:"messages"`
	Tools         []openAITool    `json:"tools,omitempty"`
	Stream        bool            `json:"stream"`
	StreamOptions map[string]bool `json:"stream_options"`
}

func (o *openAI) Exchange(ctx context.Context, req Request) (*Response, error) {
	body, err := json.Marshal(o.wire(req))
	if err != nil {
		return nil, fmt.Errorf("agent: encode the model request: %w", err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(o.baseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, &ModelError{Base: requestFailed("the provider's base URL is not usable: " + err.Error())}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	if o.key != "" {
		httpReq.Header.Set("Authorization", "Bearer "+o.key)
	}
	resp, err := o.http.Do(httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unavailable("The model's provider could not be reached.", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpFailure(resp.StatusCode, openAIErrorMessage(resp.Body))
	}
	return readOpenAIStream(ctx, resp.Body)
}

func text(s string) *string { return &s }

// wire turns the conversation into chat messages: the instructions are the
// system message, a tool use is an assistant tool call, and each tool result
// a message of role tool.
func (o *openAI) wire(req Request) openAIRequest {
	out := openAIRequest{Model: req.Model, MaxTokens: req.MaxTokens, Stream: true, StreamOptions: map[string]bool{"include_usage": true}}
	if req.System != "" {
		out.Messages = append(out.Messages, openAIMessage{Role: "system", Content: text(req.System)})
	}
	for _, m := range req.Messages {
		var said []string
		var calls []openAIToolCall
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				said = append(said, b.Text)
			case BlockToolUse:
				call := openAIToolCall{Index: len(calls), ID: b.ID, Type: "function"}
				call.Function.Name, call.Function.Arguments = b.Name, string(b.Input)
				calls = append(calls, call)
			case BlockToolResult:
				content := b.Content
				if b.IsError {
					content = "Error: " + content
				}
				out.Messages = append(out.Messages, openAIMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text(content)})
			}
		}
		if len(said) > 0 || len(calls) > 0 {
			message := openAIMessage{Role: m.Role, ToolCalls: calls}
			if len(said) > 0 {
				message.Content = text(strings.Join(said, "\n"))
			}
			out.Messages = append(out.Messages, message)
		}
	}
	for _, t := range req.Tools {
		tool := openAITool{Type: "function"}
		tool.Function.Name, tool.Function.Description, tool.Function.Parameters = t.Name, t.Description, t.InputSchema
		out.Tools = append(out.Tools, tool)
	}
	return out
}

func openAIErrorMessage(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var wire struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &wire) == nil && wire.Error.Message != "" {
		return wire.Error.Message
	}
	return string(raw)
}

// finishReasons maps the chat API's finish reasons to the loop's.
var finishReasons = map[string]string{"stop": StopEndTurn, "tool_calls": StopToolUse, "function_call": StopToolUse,
	"length": StopMaxTokens, "content_filter": StopRefusal}

// streamedCall is a tool call as its deltas build it.
type streamedCall struct {
	index           int
	id              string
	name, arguments strings.Builder
}

// readOpenAIStream assembles a response from chunks (data: {choices: [{delta,
// finish_reason}], usage}) until data: [DONE].
func readOpenAIStream(ctx context.Context, body io.Reader) (*Response, error) {
	resp := &Response{}
	var said strings.Builder
	calls := map[int]*streamedCall{}
	var failure error
	done := false
	err := readEvents(body, func(e event) bool {
		if strings.TrimSpace(e.data) == "[DONE]" {
			done = true
			return false
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content   string           `json:"content"`
					ToolCalls []openAIToolCall `json:"tool_calls"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(e.data), &chunk); err != nil {
			failure = unavailable("The model's provider sent a chunk that does not decode.", err)
			return false
		}
		if chunk.Error != nil {
			failure = unavailable("The model's provider failed mid-answer: "+chunk.Error.Message, nil)
			return false
		}
		if chunk.Usage != nil {
			resp.Usage = Usage{InputTokens: chunk.Usage.PromptTokens, OutputTokens: chunk.Usage.CompletionTokens}
		}
		for _, choice := range chunk.Choices {
			said.WriteString(choice.Delta.Content)
			for _, delta := range choice.Delta.ToolCalls {
				call, ok := calls[delta.Index]
				if !ok {
					if delta.Index < 0 || len(calls) >= maxBlocks {
						failure = invalidAnswer(fmt.Sprintf("The model's provider sent tool call %d after %d tool calls (at most %d).", delta.Index, len(calls), maxBlocks), nil)
						return false
					}
					call = &streamedCall{index: delta.Index}
					calls[delta.Index] = call
				}
				if delta.ID != "" {
					call.id = delta.ID
				}
				call.name.WriteString(delta.Function.Name)
				call.arguments.WriteString(delta.Function.Arguments)
			}
			if choice.FinishReason != "" {
				resp.StopReason = choice.FinishReason
				if mapped, ok := finishReasons[choice.FinishReason]; ok {
					resp.StopReason = mapped
				}
			}
		}
		return true
	})
	if failure != nil {
		return nil, failure
	}
	if err != nil || !done {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, streamError(err, "The model's provider ended its answer before [DONE].")
	}
	if said.Len() > 0 {
		resp.Content = append(resp.Content, Block{Type: BlockText, Text: said.String()})
	}
	indexes := make([]int, 0, len(calls))
	for i := range calls {
		indexes = append(indexes, i)
	}
	sort.Ints(indexes)
	for _, i := range indexes {
		call := calls[i]
		input := json.RawMessage(call.arguments.String())
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		if !json.Valid(input) {
			return nil, unavailable("The model's provider sent a tool call whose arguments are not JSON.", nil)
		}
		resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: call.id, Name: call.name.String(), Input: input})
	}
	return resp, nil
}
