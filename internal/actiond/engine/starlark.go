package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/starlark"
	"github.com/incusspawn/isx/internal/coded"
)

// starlark runs a Starlark tool: run(event) with event["data"] the input.
func (e *callEnv) starlark(ctx context.Context) (any, *Failure) {
	def := e.target.action.Definition
	source, _ := def.Config["source"].(string)
	event := map[string]any{"data": e.input}
	value, err := starlark.Run(ctx, starlark.Script{Name: def.Name + ".star", Source: source}, event, &host{calls: calls{env: e}, event: event}, e.request.runner.Starlark)
	if err != nil {
		return nil, scriptFailure(ctx, err, "tool")
	}
	return value, nil
}

func detail(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// calls runs what a script calls, each as a recorded call beneath the
// script's execution, in its unit of work.
type calls struct{ env *callEnv }

// tool runs one call of a resolved tool.
func (c calls) tool(ctx context.Context, t target, input map[string]any) (any, error) {
	out := c.env.request.run(ctx, t, input, c.env.beneath())
	c.env.recorded = append(c.env.recorded, out.recorded...)
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	return out.output, nil
}

func (c calls) GraphQL(ctx context.Context, req starlark.GraphQLRequest) (any, error) {
	out := c.native(ctx, action.NativeGraphQL, map[string]any{"query": req.Document, "variables": orEmpty(req.Variables), "operationName": req.OperationName})
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	data, _ := out.output.(map[string]any)
	return data["data"], nil
}

func (c calls) CEL(ctx context.Context, expression string, vars map[string]any) (any, error) {
	out := c.native(ctx, action.NativeCEL, map[string]any{"expression": expression, "variables": orEmpty(vars)})
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	value, _ := out.output.(map[string]any)
	return value["value"], nil
}

// native runs graphql() or cel() as a recorded call of the native tool.
func (c calls) native(ctx context.Context, name string, input map[string]any) result {
	t := target{action: action.Target{Definition: action.Definition{Name: name}, Enabled: true, Native: true}}
	out := c.env.request.run(ctx, t, input, c.env.beneath())
	c.env.recorded = append(c.env.recorded, out.recorded...)
	return out
}

// host is what a Starlark tool reaches: the tools its own references name,
// and graphql() and cel() when it lists them. A draft that invoke runs
// reaches what the server offers only as the server does (ACT-402,
// ACT-408): a tool the server lists through the server's reference, and
// graphql() and cel() when the server lists them, declared or not.
type host struct {
	calls
	event map[string]any
}

func (h *host) definition() action.Definition { return h.env.target.action.Definition }

func (h *host) reference(name string) (int, bool) {
	for i, ref := range h.definition().Tools {
		if ref.Name == name && !action.IsNative(name) {
			return i, true
		}
	}
	return 0, false
}

// listed is the server's tool a draft's call of name goes through.
func (h *host) listed(name string) (Offered, bool) {
	offer := h.env.request.call.Offer
	if !h.env.target.isDraft() || offer == nil || action.IsNative(name) {
		return Offered{}, false
	}
	return offer.Tool(name)
}

func (h *host) HasTool(name string) bool {
	if _, ok := h.listed(name); ok {
		return true
	}
	_, ok := h.reference(name)
	return ok
}

func (h *host) HasNative(name string) bool {
	if h.env.target.isDraft() {
		return lists(h.env.request.call.Offer, name)
	}
	for _, ref := range h.definition().Tools {
		if ref.Name == name {
			return true
		}
	}
	return false
}

func (h *host) CallTool(ctx context.Context, name string, input any) (any, error) {
	index, declared := h.reference(name)
	if tool, ok := h.listed(name); ok {
		var own func(map[string]any) (map[string]any, error)
		if declared {
			own = func(arguments map[string]any) (map[string]any, error) {
				return h.env.target.compiled.ApplyFixedInput(ctx, index, action.Scope{Event: h.event}, arguments)
			}
		}
		return h.throughServer(ctx, tool, own, input)
	}
	if !declared {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeToolNotDeclared, Message: "The tool does not declare " + name + "."}}
	}
	ref := h.definition().Tools[index]
	version := 0
	if ref.Version != nil {
		version = *ref.Version
	}
	r := h.env.request.runner
	resolved, err := action.ResolveTool(ctx, r.Registry.Resolver(h.env.request.call.Account), ref.Name, version)
	if err != nil || resolved.Deleted || !resolved.Enabled || !action.Callable(resolved) {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeToolNotDeclared, Message: "The tool " + name + " cannot be called now: it is missing, disabled or deleted."}}
	}
	compiled, err := r.Compiled.Get(resolved.ID, resolved.Version, resolved.Definition)
	if err != nil {
		return nil, err
	}
	arguments, err := toObject(input)
	if err != nil {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeInputInvalid, Message: "tools." + name + " takes an object: " + err.Error()}}
	}
	effective, err := h.env.target.compiled.ApplyFixedInput(ctx, index, action.Scope{Event: h.event}, arguments)
	if err != nil {
		return nil, &starlark.Error{Base: coded.Base{Code: CodeCELEvaluation, Message: "The fixed input for " + name + " could not be evaluated.", Err: err}}
	}
	return h.tool(ctx, target{action: resolved, compiled: compiled}, effective)
}

// scriptError is a call's failure as the script sees it: the tool error
// check=False hands over, or that ends the script with the tool's code.
func (f *Failure) scriptError() *starlark.Error {
	return &starlark.Error{Base: coded.Base{Code: f.Code, Message: f.Message, Hint: f.Hint, Err: f}}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// toObject turns a script's value into a JSON object.
func toObject(v any) (map[string]any, error) {
	if m, ok := v.(map[string]any); ok {
		return m, nil
	}
	if v == nil {
		return map[string]any{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("the input is not an object")
	}
	return m, nil
}
