package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
)

// A model exchange is one request to a model's provider and its streamed
// answer. The loop speaks one form of it (this file); each provider's wire
// format is a file of its own: anthropic.go (the Messages API) and
// openai.go (an OpenAI-compatible chat completions API).

// Block is one part of a message.
type Block struct {
	// Type is BlockText, BlockToolUse or BlockToolResult.
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// ID, Name and Input are a tool use's.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError are a tool result's.
	ToolUseID string `json:"toolUseId,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"isError,omitempty"`
}

// Block types.
const (
	BlockText       = "text"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// Message is one turn of the conversation.
type Message struct {
	// Role is "user" or "assistant".
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// ToolSpec is a tool the model may use.
type ToolSpec struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"inputSchema"`
}

// Request is one exchange's request.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []ToolSpec
	MaxTokens int
}

// Usage is what an exchange cost, as the provider counts it.
type Usage struct {
	InputTokens  int `json:"inputTokens"`
	OutputTokens int `json:"outputTokens"`
}

// Response is the model's answer, assembled from its stream.
type Response struct {
	Content []Block `json:"content"`
	// StopReason is StopEndTurn, StopToolUse, StopMaxTokens, StopRefusal
	// or another the provider gave.
	StopReason string `json:"stopReason"`
	Usage      Usage  `json:"usage"`
}

// Why a model stopped answering.
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopRefusal   = "refusal"
)

// Model answers exchanges.
type Model interface {
	Exchange(ctx context.Context, req Request) (*Response, error)
}

// Codes of a model exchange that failed.
const (
	// CodeModelUnavailable: the provider could not answer now (overloaded,
	// rate limited, down, unreachable); a later attempt may succeed.
	CodeModelUnavailable = "model_unavailable"
	// CodeModelRequestFailed: the provider refused the request (bad
	// request, authentication, unknown model); retrying will not help.
	CodeModelRequestFailed = "model_request_failed"
	// CodeModelNotConfigured: actiond has no provider of that name.
	CodeModelNotConfigured = "model_not_configured"
	// CodeModelAnswerInvalid: the provider's answer was larger than an
	// answer may be, or out of the protocol's shape (a block index far
	// ahead of the blocks started); retrying will not help.
	CodeModelAnswerInvalid = "model_answer_invalid"
)

// maxBlocks bounds the blocks (text, tool uses) of one answer.
const maxBlocks = 256

// invalidAnswer is an answer refused for its size or its shape.
func invalidAnswer(message string, cause error) *ModelError {
	return &ModelError{Base: coded.Base{Code: CodeModelAnswerInvalid, Message: message, Err: cause,
		Hint: "The model's provider answered outside what actiond accepts; check the provider configured for this agent, or ask for a shorter answer."}}
}

// streamError is what a stream that could not be read fails with.
func streamError(err error, ended string) *ModelError {
	if errors.Is(err, errResponseTooLarge) {
		return invalidAnswer(fmt.Sprintf("The model's answer was larger than %d bytes.", maxResponseBytes), err)
	}
	return unavailable(ended, err)
}

// ModelError is an exchange that failed. Retryable says whether a later
// attempt may succeed.
type ModelError struct {
	coded.Base
	Status    int
	Retryable bool
}

func (e *ModelError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return e.Message
}

// unavailable is a failure a later attempt may not meet.
func unavailable(message string, cause error) *ModelError {
	return &ModelError{Base: coded.Base{Code: CodeModelUnavailable, Message: message, Err: cause,
		Hint: "The model's provider could not answer; the task retries when its execution settings allow."}, Retryable: true}
}

// httpFailure classifies a provider's error answer: 408, 409, 429 and 5xx
// (529 is Anthropic's "overloaded") may pass; the rest will not.
func httpFailure(status int, providerMessage string) *ModelError {
	message := fmt.Sprintf("The model's provider answered HTTP %d: %s", status, strings.TrimSpace(providerMessage))
	if status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500 {
		e := unavailable(message, nil)
		e.Status = status
		return e
	}
	return &ModelError{Base: requestFailed(message), Status: status}
}

// requestFailed is the coded part of a request the provider refused.
func requestFailed(message string) coded.Base {
	return coded.Base{Code: CodeModelRequestFailed, Message: message,
		Hint: "Check the agent's model name and actiond's provider configuration (its base URL and key)."}
}
