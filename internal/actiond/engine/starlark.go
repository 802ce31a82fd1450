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
	value, err := starlark.Run(ctx, starlark.Script{Name: def.Name + ".star", Source: source}, event, &host{env: e, event: event}, starlark.Limits{})
	if err != nil {
		if ctx.Err() != nil {
			return nil, NewFailure(CodeTimeout, "The tool stopped at its deadline.", "Make the call do less, or ask the tool's owner to raise its execution.responseTimeout.")
		}
		var serr *starlark.Error
		if errors.As(err, &serr) {
			return nil, NewFailure(serr.Code, serr.Message, serr.Hint).WithDetail(detail(serr.Err))
		}
		return nil, NewFailure(CodeFailure, "The tool failed.", "Read the call's execution for what went wrong, fix the cause, and call again.").WithDetail(err.Error())
	}
	return value, nil
}

func detail(err error) any {
	if err == nil {
		return nil
	}
	return err.Error()
}

// host is what a Starlark tool reaches: the tools its own references name,
// and graphql() and cel() when it lists them. Every call is recorded beneath
// the tool's execution.
type host struct {
	env   *callEnv
	event map[string]any
}

func (h *host) reference(name string) (int, bool) {
	for i, ref := range h.env.target.action.Definition.Tools {
		if ref.Name == name && !action.IsNative(name) {
			return i, true
		}
	}
	return 0, false
}

func (h *host) HasTool(name string) bool {
	_, ok := h.reference(name)
	return ok
}

func (h *host) HasNative(name string) bool {
	for _, ref := range h.env.target.action.Definition.Tools {
		if ref.Name == name {
			return true
		}
	}
	return false
}

func (h *host) CallTool(ctx context.Context, name string, input any) (any, error) {
	index, ok := h.reference(name)
	if !ok {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeToolNotDeclared, Message: "The tool does not declare " + name + "."}}
	}
	ref := h.env.target.action.Definition.Tools[index]
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
	out := h.env.request.run(ctx, target{action: resolved, compiled: compiled}, effective, h.env.id, h.env.work, h.env.layers)
	h.env.recorded = append(h.env.recorded, out.recorded...)
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	return out.output, nil
}

func (h *host) GraphQL(ctx context.Context, req starlark.GraphQLRequest) (any, error) {
	out := h.native(ctx, action.NativeGraphQL, map[string]any{"query": req.Document, "variables": orEmpty(req.Variables), "operationName": req.OperationName})
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	data, _ := out.output.(map[string]any)
	return data["data"], nil
}

func (h *host) CEL(ctx context.Context, expression string, vars map[string]any) (any, error) {
	out := h.native(ctx, action.NativeCEL, map[string]any{"expression": expression, "variables": orEmpty(vars)})
	if out.failure != nil {
		return nil, out.failure.scriptError()
	}
	value, _ := out.output.(map[string]any)
	return value["value"], nil
}

// native runs graphql() or cel() as a recorded call of the native tool.
func (h *host) native(ctx context.Context, name string, input map[string]any) result {
	t := target{action: action.Target{Definition: action.Definition{Name: name}, Enabled: true, Native: true}}
	out := h.env.request.run(ctx, t, input, h.env.id, h.env.work, h.env.layers)
	h.env.recorded = append(h.env.recorded, out.recorded...)
	return out
}

// scriptError is a call's failure as the script sees it: the tool error
// check=False hands over, or that ends the script with the tool's code.
func (f *Failure) scriptError() *starlark.Error {
	return &starlark.Error{Base: coded.Base{Code: f.Code, Message: f.Message, Hint: f.Hint}}
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
