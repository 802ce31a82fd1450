package action

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// AgentBlock is what a callable agent runs: its instructions, the model it
// converses with, and the bounds of its loop. Which provider serves the
// model, at which address and with which key, is actiond's configuration:
// a definition names a provider, never a URL or a credential.
type AgentBlock struct {
	Instructions string     `json:"instructions"`
	Model        AgentModel `json:"model"`
	// MaxTurns bounds the model exchanges of one attempt (DefaultMaxTurns).
	MaxTurns int `json:"maxTurns,omitempty"`
	// MaxTokens bounds each answer of the model (DefaultMaxTokens).
	MaxTokens int `json:"maxTokens,omitempty"`
}

// AgentModel names a model: the configured provider that serves it
// (DefaultProvider when empty) and the provider's name for the model. A
// definition may write it as the model's name alone.
type AgentModel struct {
	Provider string `json:"provider,omitempty"`
	Name     string `json:"name"`
}

// UnmarshalJSON reads {provider?, name} or a bare name.
func (m *AgentModel) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err == nil {
		*m = AgentModel{Name: name}
		return nil
	}
	type plain AgentModel
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.DisallowUnknownFields()
	var out plain
	if err := decoder.Decode(&out); err != nil {
		return err
	}
	*m = AgentModel(out)
	return nil
}

// Defaults and bounds of an agent block.
const (
	DefaultProvider  = "anthropic"
	DefaultMaxTurns  = 16
	MaxMaxTurns      = 256
	DefaultMaxTokens = 4096
	MaxMaxTokens     = 64000
	// MaxInstructions bounds an agent's instructions, in bytes.
	MaxInstructions = 64 << 10
)

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// AgentSettings reads the agent block of a callable agent, with its
// defaults. Its errors are BAD_REQUEST *Error values naming the field.
func (d Definition) AgentSettings() (AgentBlock, error) {
	if d.Agent == nil {
		return AgentBlock{}, badRequest("agent", "a callable agent needs an agent block: {instructions, model}")
	}
	raw, err := json.Marshal(d.Agent)
	if err != nil {
		return AgentBlock{}, wrapped(CodeBadRequest, "agent", err)
	}
	var block AgentBlock
	decoder := json.NewDecoder(bytes.NewReader(raw))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&block); err != nil && !errors.Is(err, io.EOF) {
		return AgentBlock{}, agentDecodeError(err)
	}
	switch {
	case strings.TrimSpace(block.Instructions) == "":
		return AgentBlock{}, badRequest("agent.instructions", "a callable agent needs instructions: what it is for and how it works")
	case len(block.Instructions) > MaxInstructions:
		return AgentBlock{}, badRequest("agent.instructions", "the instructions are %d bytes; at most %d are allowed", len(block.Instructions), MaxInstructions)
	case strings.TrimSpace(block.Model.Name) == "":
		return AgentBlock{}, badRequest("agent.model.name", "a callable agent needs a model: the provider's name for it, such as claude-sonnet-4-5")
	case block.MaxTurns < 0 || block.MaxTurns > MaxMaxTurns:
		return AgentBlock{}, badRequest("agent.maxTurns", "maxTurns must be 1 to %d", MaxMaxTurns)
	case block.MaxTokens < 0 || block.MaxTokens > MaxMaxTokens:
		return AgentBlock{}, badRequest("agent.maxTokens", "maxTokens must be 1 to %d", MaxMaxTokens)
	}
	if block.Model.Provider == "" {
		block.Model.Provider = DefaultProvider
	}
	if !providerName.MatchString(block.Model.Provider) {
		return AgentBlock{}, badRequest("agent.model.provider", "%q is not a provider's name: lowercase letters, digits, _ and -, as actiond's configuration names it", block.Model.Provider)
	}
	if block.MaxTurns == 0 {
		block.MaxTurns = DefaultMaxTurns
	}
	if block.MaxTokens == 0 {
		block.MaxTokens = DefaultMaxTokens
	}
	return block, nil
}

func agentDecodeError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return newError(CodeBadRequest, "agent."+typeErr.Field, fmt.Sprintf("expected %s, got a JSON %s", typeErr.Type, typeErr.Value), err)
	}
	message := err.Error()
	if field, ok := strings.CutPrefix(message, "json: unknown field "); ok {
		return newError(CodeBadRequest, "agent", fmt.Sprintf("unknown field %s: an agent block takes instructions, model, maxTurns and maxTokens", field), err)
	}
	return newError(CodeBadRequest, "agent", message, err)
}
