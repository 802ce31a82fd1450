package starlark

import (
	"errors"
	"fmt"
	"hash/fnv"

	starjson "go.starlark.net/lib/json"
	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/incusspawn/isx/internal/coded"
)

// Names the runtime predeclares besides CEL's pure functions.
const (
	runName     = "run"
	toolsName   = "tools"
	graphqlName = "graphql"
	celName     = "cel"
)

// base holds the predeclared values shared by every run; they are frozen
// and find their run through the thread.
var base = func() star.StringDict {
	d := star.StringDict{
		"json":      starjson.Module,
		"struct":    star.NewBuiltin("struct", starlarkstruct.Make),
		graphqlName: star.NewBuiltin(graphqlName, graphqlBuiltin),
		celName:     star.NewBuiltin(celName, celBuiltin),
	}
	for name, value := range pureBuiltins() {
		d[name] = value
	}
	for name, value := range guarded {
		d[name] = value
	}
	d.Freeze()
	return d
}()

// isPredeclared is what the resolver accepts as predeclared: base and tools.
func isPredeclared(name string) bool {
	return name == toolsName || base.Has(name)
}

// predeclared is what a run's program sees: the names it uses, of base
// and its own tools.
func (r *run) predeclared(names []string) star.StringDict {
	d := make(star.StringDict, len(names))
	for _, name := range names {
		if name == toolsName {
			d[name] = &toolsModule{r: r}
		} else if v, ok := base[name]; ok {
			d[name] = v
		}
	}
	return d
}

// toolsModule is the tools value: its attributes are the tools the host
// offers. It is per run, because Attr has no thread to find the host by.
type toolsModule struct{ r *run }

var _ star.HasAttrs = (*toolsModule)(nil)

func (*toolsModule) String() string        { return "<tools>" }
func (*toolsModule) Type() string          { return "tools" }
func (*toolsModule) Freeze()               {}
func (*toolsModule) Truth() star.Bool      { return star.True }
func (*toolsModule) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: tools") }
func (*toolsModule) AttrNames() []string   { return nil }

func (m *toolsModule) Attr(name string) (star.Value, error) {
	if !m.r.host.HasTool(name) {
		return nil, notDeclared("tools." + name)
	}
	return &toolFunction{name: name}, nil
}

func notDeclared(what string) *Error {
	return &Error{Base: coded.Base{
		Code:    CodeToolNotDeclared,
		Message: what + " is not offered to this script",
		Hint:    "Call only the tools the server or action lists; graphql() and cel() need the native tool of that name listed.",
	}}
}

// toolFunction is tools.<name>.
type toolFunction struct{ name string }

var _ star.Callable = (*toolFunction)(nil)

func (f *toolFunction) Name() string   { return "tools." + f.name }
func (f *toolFunction) String() string { return "<tool " + f.name + ">" }
func (*toolFunction) Type() string     { return "tool" }
func (*toolFunction) Freeze()          {}
func (*toolFunction) Truth() star.Bool { return star.True }
func (f *toolFunction) Hash() (uint32, error) {
	h := fnv.New32a()
	h.Write([]byte(f.name))
	return h.Sum32(), nil
}

func (f *toolFunction) CallInternal(thread *star.Thread, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var input star.Value = star.NewDict(0)
	check := true
	if err := star.UnpackArgs(f.Name(), args, kwargs, "input?", &input, "check?", &check); err != nil {
		return nil, err
	}
	r := runOf(thread)
	goInput, err := r.toJSON(input, "the input")
	if err != nil {
		return nil, err
	}
	if r.toolCalls++; r.toolCalls > r.limits.MaxToolCalls {
		return nil, limitExceeded(r.limits.MaxToolCalls, "tool calls")
	}
	output, err := r.host.CallTool(r.ctx, f.name, goInput)
	return r.answer(f.Name(), check, output, err)
}

func graphqlBuiltin(thread *star.Thread, fn *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var document string
	var variables, operation star.Value = star.None, star.None
	check := true
	if err := star.UnpackArgs(fn.Name(), args, kwargs, "document", &document, "variables?", &variables, "operation_name?", &operation, "check?", &check); err != nil {
		return nil, err
	}
	request := GraphQLRequest{Document: document}
	switch v := variables.(type) {
	case star.NoneType:
	case *star.Dict:
		converted, err := runOf(thread).toJSON(v, "variables")
		if err != nil {
			return nil, err
		}
		request.Variables = converted.(map[string]any)
	default:
		return nil, fmt.Errorf("variables must be a dict or None, not %s", variables.Type())
	}
	switch v := operation.(type) {
	case star.NoneType:
	case star.String:
		request.OperationName = string(v)
	default:
		return nil, fmt.Errorf("operation_name must be a string or None, not %s", operation.Type())
	}
	r := runOf(thread)
	if !r.host.HasNative(NativeGraphQL) {
		return r.answer(fn.Name(), check, nil, notDeclared("graphql()"))
	}
	if r.graphqlCalls++; r.graphqlCalls > r.limits.MaxGraphQLCalls {
		return nil, limitExceeded(r.limits.MaxGraphQLCalls, "graphql calls")
	}
	data, err := r.host.GraphQL(r.ctx, request)
	return r.answer(fn.Name(), check, data, err)
}

func celBuiltin(thread *star.Thread, fn *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	var expression string
	var vars star.Value = star.None
	check := true
	if err := star.UnpackArgs(fn.Name(), args, kwargs, "expression", &expression, "vars?", &vars, "check?", &check); err != nil {
		return nil, err
	}
	var goVars map[string]any
	switch v := vars.(type) {
	case star.NoneType:
	case *star.Dict:
		converted, err := runOf(thread).toJSON(v, "vars")
		if err != nil {
			return nil, err
		}
		goVars = converted.(map[string]any)
	default:
		return nil, fmt.Errorf("vars must be a dict or None, not %s", vars.Type())
	}
	r := runOf(thread)
	if !r.host.HasNative(NativeCEL) {
		return r.answer(fn.Name(), check, nil, notDeclared("cel()"))
	}
	if r.celCalls++; r.celCalls > r.limits.MaxCELCalls {
		return nil, limitExceeded(r.limits.MaxCELCalls, "cel calls")
	}
	value, err := r.host.CEL(r.ctx, expression, goVars)
	return r.answer(fn.Name(), check, value, err)
}

func limitExceeded(limit int, what string) *Error {
	return &Error{Base: coded.Base{
		Code:    CodeLimitExceeded,
		Message: fmt.Sprintf("the script made more than %d %s, its limit", limit, what),
		Hint:    "Make fewer calls in one script, for example by asking for more in each call, or split the work across several scripts.",
	}}
}

// answer turns what a call returned into the script's value: the output, or
// with check=False the ok/error dict. A tool error ends the script unless
// check is False; a host failure always does.
func (r *run) answer(what string, check bool, output any, err error) (star.Value, error) {
	if err != nil {
		var toolErr *Error
		if !errors.As(err, &toolErr) {
			r.hostErr = err
			return nil, err
		}
		if check {
			return nil, err // the whole chain, for the record
		}
		return failedCall(toolErr)
	}
	value, err := fromJSON(output, r.budget)
	var limited *Error
	if errors.As(err, &limited) {
		return nil, limited
	}
	if err != nil {
		r.hostErr = fmt.Errorf("%s returned a value that is not JSON: %w", what, err)
		return nil, r.hostErr
	}
	if check {
		return value, nil
	}
	return dictOf("ok", star.True, "value", value)
}

func failedCall(toolErr *Error) (star.Value, error) {
	code := toolErr.Code
	if code == "" {
		code = CodeActionFailure
	}
	detail, err := dictOf("code", star.String(code), "message", star.String(toolErr.Message), "hint", star.String(toolErr.Hint))
	if err != nil {
		return nil, err
	}
	return dictOf("ok", star.False, "error", detail)
}

// dictOf makes a dict of key, value pairs, keys first.
func dictOf(pairs ...any) (*star.Dict, error) {
	d := star.NewDict(len(pairs) / 2)
	for i := 0; i < len(pairs); i += 2 {
		if err := d.SetKey(star.String(pairs[i].(string)), pairs[i+1].(star.Value)); err != nil {
			return nil, err
		}
	}
	return d, nil
}
