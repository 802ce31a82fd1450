package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// anthropic speaks the Anthropic Messages API (POST /v1/messages), streaming.
type anthropic struct {
	baseURL string
	key     string
	http    *http.Client
}

// anthropicVersion is the API version the requests ask for.
const anthropicVersion = "2023-06-01"

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

type anthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema"`
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	Stream    bool               `json:"stream"`
}

func (a *anthropic) Exchange(ctx context.Context, req Request) (*Response, error) {
	body, err := json.Marshal(a.wire(req))
	if err != nil {
		return nil, fmt.Errorf("agent: encode the model request: %w", err)
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.baseURL, "/")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return nil, &ModelError{Base: requestFailed("the provider's base URL is not usable: " + err.Error())}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream")
	httpReq.Header.Set("anthropic-version", anthropicVersion)
	if a.key != "" {
		httpReq.Header.Set("x-api-key", a.key)
	}
	resp, err := a.http.Do(httpReq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, unavailable("The model's provider could not be reached.", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, httpFailure(resp.StatusCode, anthropicErrorMessage(resp.Body))
	}
	return readAnthropicStream(ctx, resp.Body)
}

func (a *anthropic) wire(req Request) anthropicRequest {
	out := anthropicRequest{Model: req.Model, MaxTokens: req.MaxTokens, System: req.System, Stream: true, Messages: []anthropicMessage{}}
	for _, m := range req.Messages {
		message := anthropicMessage{Role: m.Role}
		for _, b := range m.Content {
			block := anthropicBlock{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, Input: b.Input, ToolUseID: b.ToolUseID, Content: b.Content, IsError: b.IsError}
			if b.Type == BlockToolUse && len(block.Input) == 0 {
				block.Input = json.RawMessage("{}")
			}
			message.Content = append(message.Content, block)
		}
		out.Messages = append(out.Messages, message)
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool(t))
	}
	return out
}

// anthropicErrorMessage reads {"type":"error","error":{"type","message"}}.
func anthropicErrorMessage(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 64<<10))
	var wire struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &wire) == nil && wire.Error.Message != "" {
		return wire.Error.Type + ": " + wire.Error.Message
	}
	return string(raw)
}

// readAnthropicStream assembles a response from its events: message_start,
// then per content block a start, deltas (text_delta, input_json_delta) and
// a stop, then message_delta (stop_reason, usage) and message_stop; ping
// anywhere; error ends it.
func readAnthropicStream(ctx context.Context, body io.Reader) (*Response, error) {
	resp := &Response{}
	var blocks []*Block
	var inputs, texts []*strings.Builder
	var failure error
	stopped := false
	err := readEvents(body, func(e event) bool {
		var wire struct {
			Type    string `json:"type"`
			Index   int    `json:"index"`
			Message struct {
				Usage struct {
					InputTokens int `json:"input_tokens"`
				} `json:"usage"`
			} `json:"message"`
			ContentBlock anthropicBlock `json:"content_block"`
			Delta        struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
			Usage struct {
				OutputTokens int `json:"output_tokens"`
			} `json:"usage"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(e.data), &wire); err != nil {
			failure = unavailable("The model's provider sent an event that does not decode.", err)
			return false
		}
		switch wire.Type {
		case "message_start":
			resp.Usage.InputTokens = wire.Message.Usage.InputTokens
		case "content_block_start":
			// Blocks start in order; an index further on would make every
			// block up to it.
			if wire.Index < 0 || wire.Index > len(blocks) || wire.Index >= maxBlocks {
				failure = invalidAnswer(fmt.Sprintf("The model's provider started block %d after %d blocks (at most %d).", wire.Index, len(blocks), maxBlocks), nil)
				return false
			}
			if wire.Index == len(blocks) {
				blocks, inputs, texts = append(blocks, &Block{}), append(inputs, &strings.Builder{}), append(texts, &strings.Builder{})
			}
			b := wire.ContentBlock
			*blocks[wire.Index] = Block{Type: b.Type, ID: b.ID, Name: b.Name}
			texts[wire.Index].Reset()
			texts[wire.Index].WriteString(b.Text)
		case "content_block_delta":
			if wire.Index < 0 || wire.Index >= len(blocks) {
				failure = unavailable("The model's provider sent a delta for a block it never started.", nil)
				return false
			}
			switch wire.Delta.Type {
			case "text_delta":
				texts[wire.Index].WriteString(wire.Delta.Text)
			case "input_json_delta":
				inputs[wire.Index].WriteString(wire.Delta.PartialJSON)
			}
		case "message_delta":
			if wire.Delta.StopReason != "" {
				resp.StopReason = wire.Delta.StopReason
			}
			resp.Usage.OutputTokens = wire.Usage.OutputTokens
		case "message_stop":
			stopped = true
			return false
		case "error":
			failure = streamFailure(wire.Error.Type, wire.Error.Message)
			return false
		}
		return true
	})
	if failure != nil {
		return nil, failure
	}
	if err != nil || !stopped {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, streamError(err, "The model's provider ended its answer before message_stop.")
	}
	for i, b := range blocks {
		b.Text = texts[i].String()
		if b.Type == BlockToolUse {
			b.Input = json.RawMessage(inputs[i].String())
			if len(b.Input) == 0 {
				b.Input = json.RawMessage("{}")
			}
			if !json.Valid(b.Input) {
				return nil, unavailable("The model's provider sent a tool use whose input is not JSON.", nil)
			}
		}
		resp.Content = append(resp.Content, *b)
	}
	return resp, nil
}

// streamFailure is an error event: overloaded and API errors may pass.
func streamFailure(kind, message string) *ModelError {
	text := fmt.Sprintf("The model's provider failed mid-answer: %s: %s", kind, message)
	switch kind {
	case "overloaded_error", "api_error", "rate_limit_error", "timeout_error":
		return unavailable(text, nil)
	}
	return &ModelError{Base: requestFailed(text)}
}
