package graph

import (
	"context"
	"net/url"
	"slices"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
)

// The namespaces of queries hold nothing: their fields are resolvers, which
// may run concurrently.
type (
	ActionsQuery struct{}
	KVQuery      struct{}
	AuthQuery    struct{}
)

// The namespaces of mutations carry the operation's context, so that their
// fields are methods without one: gqlgen runs such fields one after another
// in document order, as it runs the root mutation's fields. A resolver with
// a context would run concurrently with its siblings, and a createAction
// could miss the tool its sibling before it creates.
type (
	ActionsMutation struct{ ctx context.Context }
	KVMutation      struct{ ctx context.Context }
	AuthMutation    struct{ ctx context.Context }
)

// Action is an action version as the API shows it.
type Action struct {
	stored *registry.StoredAction
}

func newAction(stored *registry.StoredAction) *Action { return &Action{stored: stored} }

func (a *Action) def() action.Definition { return a.stored.Definition }

func (a *Action) ID() string          { return a.stored.ID }
func (a *Action) Version() int        { return a.stored.Version }
func (a *Action) Name() string        { return a.def().Name }
func (a *Action) Kind() string        { return string(a.def().Kind) }
func (a *Action) Enabled() bool       { return a.def().IsEnabled() }
func (a *Action) Deleted() bool       { return a.stored.Deleted }
func (a *Action) Created() time.Time  { return a.stored.Created }
func (a *Action) Modified() time.Time { return a.stored.Modified }

func (a *Action) Description() *string { return optional(a.def().Description) }

// Config is the kind-specific configuration, {} when there is none.
func (a *Action) Config() (JSON, error) {
	if len(a.def().Config) == 0 {
		return JSON("{}"), nil
	}
	return toJSON(a.def().Config)
}

func (a *Action) Tool() (JSON, error) {
	if a.def().Tool == nil {
		return nil, nil
	}
	return toJSON(a.def().Tool)
}

func (a *Action) Agent() (JSON, error) {
	if a.def().Agent == nil {
		return nil, nil
	}
	return toJSON(a.def().Agent)
}

func (a *Action) Triggers() ([]JSON, error) {
	if a.def().Triggers == nil {
		return nil, nil
	}
	out := make([]JSON, len(a.def().Triggers))
	for i, trigger := range a.def().Triggers {
		raw, err := toJSON(trigger)
		if err != nil {
			return nil, err
		}
		out[i] = raw
	}
	return out, nil
}

func (a *Action) Policies() ([]*Policy, error) { return policies(a.def().Policies) }

func (a *Action) Tools() ([]*ToolReference, error) {
	out := make([]*ToolReference, len(a.def().Tools))
	for i, ref := range a.def().Tools {
		input, err := toJSON(nilIfEmpty(ref.Input))
		if err != nil {
			return nil, err
		}
		out[i] = &ToolReference{Name: ref.Name, Version: ref.Version, Input: input}
	}
	return out, nil
}

func (a *Action) Skills() []*SkillReference {
	out := make([]*SkillReference, len(a.def().Skills))
	for i, ref := range a.def().Skills {
		out[i] = &SkillReference{Name: ref.Name, Version: ref.Version}
	}
	return out
}

func (a *Action) Execution() *ExecutionSettings {
	return &ExecutionSettings{ResponseTimeout: int(a.def().ResponseTimeout() / time.Second)}
}

func (a *Action) Session() (JSON, error) {
	if a.def().Session == nil {
		return nil, nil
	}
	return toJSON(a.def().Session)
}

// Mcp is the mcp block with its defaults filled in, and the server's
// endpoint path.
func (a *Action) Mcp(ctx context.Context) (*McpBlock, error) {
	def := a.def()
	block := def.MCP
	if block == nil {
		return nil, nil
	}
	session, err := toJSON(block.Session)
	if err != nil {
		return nil, err
	}
	if session == nil {
		session = JSON("{}")
	}
	resources, err := toJSON(nilIfEmptySlice(block.Resources))
	if err != nil {
		return nil, err
	}
	out := &McpBlock{
		Name:         block.Name,
		Instructions: optional(block.Instructions),
		Session:      session,
		Mode:         McpMode(def.ServerMode()),
		Intent:       McpIntent(def.ServerIntent()),
		Resources:    resources,
		Endpoint:     "/mcp/v1/" + url.PathEscape(current(ctx).env.Account) + "/" + url.PathEscape(def.Name),
	}
	if block.Limits != nil {
		out.Limits = &McpLimits{CallsPerMinute: &block.Limits.CallsPerMinute}
	}
	return out, nil
}

// Definition is the whole stored definition.
func (a *Action) Definition() (JSON, error) { return toJSON(a.def()) }

// History lists every version, oldest first.
func (a *Action) History(ctx context.Context) ([]*Action, error) {
	st := current(ctx)
	versions, err := registry.History(ctx, st.env.Work, a.stored.ID)
	if err != nil {
		return nil, err
	}
	out := make([]*Action, len(versions))
	for i, v := range versions {
		out[i] = newAction(v)
	}
	return out, nil
}

func policies(list []policy.Policy) ([]*Policy, error) {
	out := make([]*Policy, len(list))
	for i, p := range list {
		assertions, err := toJSON(nilIfEmpty(p.Assertions))
		if err != nil {
			return nil, err
		}
		out[i] = &Policy{
			Effect:     PolicyEffect(p.Effect),
			Actions:    slices.Clone(p.Actions),
			Resources:  slices.Clone(p.Resources),
			Assertions: assertions,
		}
	}
	return out, nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nilIfEmpty[V any](m map[string]V) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

func nilIfEmptySlice[V any](s []V) any {
	if len(s) == 0 {
		return nil
	}
	return s
}
