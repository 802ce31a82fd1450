package graph

import (
	"context"
	"net/url"
	"slices"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
)

// The namespaces of mutations carry the operation's context, so that their
// fields are methods without one (see model.ActionsMutation).
type (
	actionsMutation struct{ ctx context.Context }
	kvMutation      struct{ ctx context.Context }
	authMutation    struct{ ctx context.Context }
)

// actionVersion is an action version as the API shows it (model.Action).
type actionVersion struct {
	stored *registry.StoredAction
}

func newAction(stored *registry.StoredAction) model.Action { return &actionVersion{stored: stored} }

func (a *actionVersion) def() action.Definition { return a.stored.Definition }

func (a *actionVersion) ID() string          { return a.stored.ID }
func (a *actionVersion) Version() int        { return a.stored.Version }
func (a *actionVersion) Name() string        { return a.def().Name }
func (a *actionVersion) Kind() string        { return string(a.def().Kind) }
func (a *actionVersion) Enabled() bool       { return a.def().IsEnabled() }
func (a *actionVersion) Deleted() bool       { return a.stored.Deleted }
func (a *actionVersion) Created() time.Time  { return a.stored.Created }
func (a *actionVersion) Modified() time.Time { return a.stored.Modified }

func (a *actionVersion) Description() *string { return optional(a.def().Description) }

// Config is the kind-specific configuration, {} when there is none.
func (a *actionVersion) Config() (model.JSON, error) {
	if len(a.def().Config) == 0 {
		return model.JSON("{}"), nil
	}
	return toJSON(a.def().Config)
}

func (a *actionVersion) Tool() (model.JSON, error) {
	if a.def().Tool == nil {
		return nil, nil
	}
	return toJSON(a.def().Tool)
}

func (a *actionVersion) Agent() (model.JSON, error) {
	if a.def().Agent == nil {
		return nil, nil
	}
	return toJSON(a.def().Agent)
}

func (a *actionVersion) Triggers() ([]model.JSON, error) {
	if a.def().Triggers == nil {
		return nil, nil
	}
	out := make([]model.JSON, len(a.def().Triggers))
	for i, trigger := range a.def().Triggers {
		raw, err := toJSON(trigger)
		if err != nil {
			return nil, err
		}
		out[i] = raw
	}
	return out, nil
}

func (a *actionVersion) Policies() ([]*model.Policy, error) { return policies(a.def().Policies) }

func (a *actionVersion) Tools() ([]*model.ToolReference, error) {
	out := make([]*model.ToolReference, len(a.def().Tools))
	for i, ref := range a.def().Tools {
		input, err := toJSON(nilIfEmpty(ref.Input))
		if err != nil {
			return nil, err
		}
		out[i] = &model.ToolReference{Name: ref.Name, Version: ref.Version, Input: input}
	}
	return out, nil
}

func (a *actionVersion) Skills() []*model.SkillReference {
	out := make([]*model.SkillReference, len(a.def().Skills))
	for i, ref := range a.def().Skills {
		out[i] = &model.SkillReference{Name: ref.Name, Version: ref.Version}
	}
	return out
}

func (a *actionVersion) Execution() *model.ExecutionSettings {
	settings := &model.ExecutionSettings{ResponseTimeout: int(a.def().AttemptTimeout() / time.Second)}
	if a.def().IsCallableAgent() {
		retries := a.def().Retries()
		settings.Retries = &retries
	}
	return settings
}

func (a *actionVersion) Session() (model.JSON, error) {
	if a.def().Session == nil {
		return nil, nil
	}
	return toJSON(a.def().Session)
}

// Mcp is the mcp block with its defaults filled in, and the server's
// endpoint path.
func (a *actionVersion) Mcp(ctx context.Context) (*model.McpBlock, error) {
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
		session = model.JSON("{}")
	}
	resources, err := toJSON(nilIfEmptySlice(block.Resources))
	if err != nil {
		return nil, err
	}
	out := &model.McpBlock{
		Name:         block.Name,
		Instructions: optional(block.Instructions),
		Session:      session,
		Mode:         model.McpMode(def.ServerMode()),
		Intent:       model.McpIntent(def.ServerIntent()),
		Resources:    resources,
		Endpoint:     "/mcp/v1/" + url.PathEscape(current(ctx).env.Account) + "/" + url.PathEscape(def.Name),
	}
	if block.Limits != nil {
		out.Limits = &model.McpLimits{CallsPerMinute: &block.Limits.CallsPerMinute}
	}
	return out, nil
}

// Definition is the whole stored definition.
func (a *actionVersion) Definition() (model.JSON, error) { return toJSON(a.def()) }

// History lists every version, oldest first.
func (a *actionVersion) History(ctx context.Context) ([]model.Action, error) {
	st := current(ctx)
	versions, err := registry.History(ctx, st.env.Work, a.stored.ID)
	if err != nil {
		return nil, err
	}
	out := make([]model.Action, len(versions))
	for i, v := range versions {
		out[i] = newAction(v)
	}
	return out, nil
}

func policies(list []policy.Policy) ([]*model.Policy, error) {
	out := make([]*model.Policy, len(list))
	for i, p := range list {
		assertions, err := toJSON(nilIfEmpty(p.Assertions))
		if err != nil {
			return nil, err
		}
		out[i] = &model.Policy{
			Effect:     model.PolicyEffect(p.Effect),
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
