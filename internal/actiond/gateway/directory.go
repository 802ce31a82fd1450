package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Registry reads the committed actions and principals of an account.
type Registry interface {
	// Resolver resolves action names as they stand now.
	Resolver(account string) action.Resolver
	// Principal returns a principal's policies; found is false when the
	// principal has no record (and so no permissions).
	Principal(ctx context.Context, account, name string) (policies []policy.Policy, found bool, err error)
}

// Resolve builds the Directory the endpoint uses: servers resolved from the
// registry, cached while the account's registry generation stays the same,
// so that an unpinned reference still resolves to the latest version at
// every request.
func Resolve(s *store.Store, registry Registry, compiled *action.Cache) Directory {
	return &directory{store: s, registry: registry, compiled: compiled, servers: map[serverKey]*resolved{}, principals: map[serverKey]cachedPrincipal{}, replays: map[replayKey]*resolved{}}
}

type directory struct {
	store    *store.Store
	registry Registry
	compiled *action.Cache

	mu         sync.Mutex
	servers    map[serverKey]*resolved
	principals map[serverKey]cachedPrincipal
	replays    map[replayKey]*resolved
}

type cachedPrincipal struct {
	generation int64
	policies   []policy.Policy
}

type serverKey struct{ account, name string }

// resolved is the part of a server that does not depend on who asks.
type resolved struct {
	generation int64
	server     Server
	document   map[string]any
}

func (d *directory) Server(ctx context.Context, account, name string, who *auth.Identity) (*Server, error) {
	generation, err := d.store.Generation(ctx, account)
	if err != nil {
		return nil, err
	}
	base, err := d.base(ctx, account, name, generation)
	if err != nil {
		return nil, err
	}
	policies, err := d.principal(ctx, account, who.Principal, generation)
	if err != nil {
		return nil, err
	}
	principal := policy.Layer{Name: policy.LayerPrincipal, Policies: policies, PrincipalID: who.Principal}
	request := policy.Request{Resource: action.ResourceAction, Claims: who.Claims, Document: base.document}
	request.Operation = "SELECT"
	if policy.Check(ctx, request, principal) != nil {
		return nil, ErrServerNotFound
	}
	server := base.server // a copy: the per-request fields are set below
	request.Operation = "INVOKE"
	server.Invokable = policy.Check(ctx, request, principal) == nil
	server.Claims = who.Claims
	server.Layers = []policy.Layer{principal}
	if len(server.Definition.Policies) > 0 {
		server.Layers = append(server.Layers, policy.Layer{Name: policy.LayerServer, Policies: server.Definition.Policies, ActionID: server.ActionID})
	}
	return &server, nil
}

// principal reads a principal's policies, or takes them from the cache while
// the registry generation is unchanged.
func (d *directory) principal(ctx context.Context, account, name string, generation int64) ([]policy.Policy, error) {
	key := serverKey{account, name}
	d.mu.Lock()
	cached, ok := d.principals[key]
	d.mu.Unlock()
	if ok && cached.generation == generation {
		return cached.policies, nil
	}
	policies, _, err := d.registry.Principal(ctx, account, name)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	if len(d.principals) > 4096 {
		clear(d.principals)
	}
	d.principals[key] = cachedPrincipal{generation: generation, policies: policies}
	d.mu.Unlock()
	return policies, nil
}

// base resolves the server and its tools, or takes them from the cache.
func (d *directory) base(ctx context.Context, account, name string, generation int64) (*resolved, error) {
	key := serverKey{account, name}
	d.mu.Lock()
	cached, ok := d.servers[key]
	d.mu.Unlock()
	if ok && cached.generation == generation {
		return cached, nil
	}
	r, err := d.resolve(ctx, account, name)
	if err != nil {
		return nil, err
	}
	r.generation = generation
	d.mu.Lock()
	if len(d.servers) > 4096 {
		clear(d.servers)
	}
	d.servers[key] = r
	d.mu.Unlock()
	return r, nil
}

func (d *directory) resolve(ctx context.Context, account, name string) (*resolved, error) {
	resolver := d.registry.Resolver(account)
	target, err := resolver.Resolve(ctx, name, 0)
	if errors.Is(err, action.ErrNotFound) {
		return nil, ErrServerNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("resolve server %q: %w", name, err)
	}
	def := target.Definition
	if def.Kind != action.KindMCP || target.Deleted || !target.Enabled || def.MCP == nil {
		return nil, ErrServerNotFound
	}
	compiled, err := d.compiled.Get(target.ID, target.Version, def)
	if err != nil {
		return nil, fmt.Errorf("compile server %q: %w", name, err)
	}
	return d.build(ctx, resolver, account, target, compiled)
}

// build resolves a server version's tools, skills and templates: the
// server as every request to that version sees it before who asks.
func (d *directory) build(ctx context.Context, resolver action.Resolver, account string, target action.Target, compiled *action.Compiled) (*resolved, error) {
	def := target.Definition
	tools, err := d.tools(ctx, resolver, def)
	if err != nil {
		return nil, err
	}
	server := Server{
		Account:         account,
		ActionID:        target.ID,
		Version:         int64(target.Version),
		Name:            def.Name,
		MCPName:         def.MCP.Name,
		Instructions:    def.MCP.Instructions,
		Preview:         def.ServerMode() == action.ModePreview,
		Intent:          def.ServerIntent(),
		ResponseTimeout: def.ResponseTimeout(),
		Definition:      def,
		Compiled:        compiled,
		Tools:           tools,
	}
	if def.MCP.Limits != nil {
		server.CallsPerMinute = def.MCP.Limits.CallsPerMinute
	}
	if server.Skills, err = d.skills(ctx, resolver, def, tools); err != nil {
		return nil, err
	}
	server.Templates = templates(def, tools)
	return &resolved{server: server, document: action.Document(target)}, nil
}

// tools resolves each reference at its pinned or latest version, in
// reference order. A reference that no longer resolves to something callable
// and enabled is left out; one whose name clashes with an earlier tool's, or
// that grew its own intent property, is kept out of listings and refused
// with a hint.
func (d *directory) tools(ctx context.Context, resolver action.Resolver, server action.Definition) ([]*Tool, error) {
	intent := server.ServerIntent()
	offered, err := action.OfferedTools(ctx, resolver, server)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var tools []*Tool
	for _, o := range offered {
		ref, target := o.Ref, o.Target
		tool, err := d.tool(ctx, resolver, server, ref, o.Index, target, intent)
		if err != nil {
			return nil, err
		}
		if tool == nil {
			continue
		}
		switch action.ClashOf(seen, tool.Name, target, intent) {
		case action.NameClash:
			tool.Unavailable = engine.NewFailure(errToolUnavailable,
				"This tool's current version has the name of another tool of this server, so the server cannot offer it.",
				"Ask the server's owner to pin a version of the tool in the server's reference, or to rename it.")
		case action.IntentClash:
			tool.Unavailable = engine.NewFailure(errToolUnavailable,
				"This tool's current version declares its own intent property, which clashes with this server's stated intent.",
				"Ask the server's owner to pin a version of the tool in the server's reference, or to rename the tool's intent property.")
		}
		seen[tool.Name] = true
		tools = append(tools, tool)
	}
	return tools, nil
}

func (d *directory) tool(ctx context.Context, resolver action.Resolver, server action.Definition, ref action.ToolRef, index int, target action.Target, intent action.Intent) (*Tool, error) {
	tool := &Tool{Name: action.VisibleName(target), Ref: index, Target: target}
	var schema map[string]any
	if target.Native {
		native, ok := engine.Native(target.Definition.Name)
		if !ok {
			return nil, nil // a native tool this engine does not run
		}
		tool.Description = native.Description()
		schema, tool.OutputSchema = mcpkit.SchemaMap(native.InputSchema()), mcpkit.SchemaMap(native.OutputSchema())
	} else {
		compiled, err := d.compiled.Get(target.ID, target.Version, target.Definition)
		if err != nil {
			return nil, fmt.Errorf("compile tool %q v%d: %w", target.Definition.Name, target.Version, err)
		}
		tool.Compiled = compiled
		tool.Description = target.Definition.Description
		schema = action.InputSchema(target)
		if block := target.Definition.Tool; block != nil && block.OutputSchema["type"] == "object" {
			tool.OutputSchema = block.OutputSchema
		}
	}
	tool.InputSchema = action.EffectiveInputSchema(schema, ref, intent)
	openWorld, err := action.OpenWorld(ctx, resolver, target)
	if target.Native && target.Definition.Name == action.NativeProgram {
		// A program can call every tool the server lists (ACT-318).
		openWorld, err = action.ServerOpenWorld(ctx, resolver, server)
	}
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", tool.Name, err)
	}
	annotations := action.Annotations(server, target, openWorld)
	tool.Annotations = &annotations
	return tool, nil
}
