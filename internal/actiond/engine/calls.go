// Package calls runs tool calls beneath an MCP request: actions of kind cel,
// graphql and tool (Starlark), and the native graphql and cel tools. Each
// call is recorded as a child execution with its effective input, its output
// or error, and the rows it wrote (or would have written, in a preview), and
// runs under the request's policy layers narrowed by the tool's own.
package engine

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// GraphQL runs an operation against the platform's API inside a unit of
// work, under policy layers.
type GraphQL interface {
	Execute(ctx context.Context, op Operation) (data any, err error)
}

// Operation is one GraphQL operation a call runs.
type Operation struct {
	Account       string
	Work          *store.Work
	Layers        []policy.Layer
	Claims        map[string]any
	Principal     string
	Query         string
	Variables     map[string]any
	OperationName string
}

// Registry resolves the actions a tool's own references name.
type Registry interface {
	Resolver(account string) action.Resolver
}

// IDs makes execution IDs.
type IDs interface{ New() string }

// Runner runs calls. It is the endpoint's runner.
type Runner struct {
	GraphQL  GraphQL
	Registry Registry
	Compiled *action.Cache
	IDs      IDs
	Clock    clock.Clock
	// Random feeds uuid.New() in the native cel tool.
	Random io.Reader

	natives sync.Map // native tool name → *action.Compiled input schema
}

// Call runs one tools/call beneath a request.
func (r *Runner) Call(ctx context.Context, c *Call) Outcome {
	if r.Clock == nil {
		r.Clock = clock.Real{}
	}
	if r.Random == nil {
		r.Random = rand.Reader
	}
	run := &request{runner: r, call: c}
	out := run.run(ctx, target{action: c.Target, compiled: c.Compiled}, c.Input, c.ParentID, c.Work, c.Layers)
	return Outcome{ExecutionID: out.id, Output: out.output, Failure: out.failure}
}

// request is the state one tools/call shares with the calls beneath it.
type request struct {
	runner *Runner
	call   *Call
}

type target struct {
	action   action.Target
	compiled *action.Compiled // nil for a native tool
}

type result struct {
	id      string
	output  any
	failure *Failure
	// recorded lists the executions of the call and everything beneath it,
	// so that a failure can mark them rolled back.
	recorded []*store.Execution
}

// call runs one call as a child execution of parent: nested in the parent's
// work (merged only on success), under the parent's layers narrowed by the
// tool's own policies, bounded by the tool's own response timeout.
func (q *request) run(ctx context.Context, t target, input map[string]any, parent string, parentWork *store.Work, layers []policy.Layer) result {
	r := q.runner
	exec := q.execution(t, input, parent)
	res := result{id: exec.ID}
	work := parentWork.Nested()
	if policies := t.action.Definition.Policies; !t.action.Native && len(policies) > 0 {
		layers = append(append([]policy.Layer{}, layers...), policy.Layer{Name: policy.LayerTool, Policies: policies, ActionID: t.action.ID})
	}
	callCtx := ctx
	if !t.action.Native {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, t.action.Definition.ResponseTimeout())
		defer cancel()
	}
	env := &callEnv{request: q, target: t, id: exec.ID, work: work, layers: layers, input: input}
	output, failure := env.run(callCtx)
	if failure == nil && t.compiled != nil {
		if err := t.compiled.ValidateOutput(output); err != nil {
			failure = NewFailure(CodeOutputInvalid, "The tool answered with output that does not match its output schema.", "Ask the tool's owner to fix the tool or its outputSchema.").WithDetail(err.Error())
		}
	}
	if failure == nil && callCtx.Err() != nil && ctx.Err() == nil {
		failure = timeoutFailure(t)
	}
	exec.EndedAt = r.Clock.Now()
	exec.WriteSet = work.Writes()
	res.recorded = append(env.recorded, exec)
	if failure != nil {
		if ctx.Err() == nil && callCtx.Err() != nil && failure.Code != CodeOutputInvalid {
			failure = timeoutFailure(t)
		}
		exec.Status = store.Failed
		exec.Error, _ = json.Marshal(map[string]any{"code": failure.Code, "message": failure.Message, "hint": failure.Hint, "detail": failure.Detail})
		for _, beneath := range env.recorded {
			if beneath.RolledBackBy == "" {
				beneath.RolledBackBy = exec.ID
			}
		}
		res.failure = failure
	} else {
		parentWork.Merge(work)
		exec.Status = store.Succeeded
		exec.Output, _ = json.Marshal(output)
		res.output = output
	}
	q.call.Record(exec)
	return res
}

func timeoutFailure(t target) *Failure {
	return NewFailure(CodeTimeout, "The tool passed its own response timeout.", "Make the call do less, or ask the tool's owner to raise its execution.responseTimeout.").WithDetail(map[string]any{"responseTimeoutSeconds": int(t.action.Definition.ResponseTimeout().Seconds())})
}

func (q *request) execution(t target, input map[string]any, parent string) *store.Execution {
	c := q.call
	actionID, name := t.action.ID, t.action.Definition.Name
	if t.action.Native {
		actionID = "native:" + name
	}
	inputJSON, _ := json.Marshal(input)
	return &store.Execution{
		ID:            q.runner.IDs.New(),
		Account:       c.Account,
		ActionID:      actionID,
		ActionVersion: int64(t.action.Version),
		ActionName:    name,
		EventType:     "tool.call",
		Role:          store.RoleCall,
		ParentID:      parent,
		SessionID:     "",
		Status:        store.Running,
		Caller:        c.Who.Principal,
		Subject:       c.Who.Subject,
		Client:        c.Who.Client,
		Input:         inputJSON,
		Preview:       c.Preview,
		StartedAt:     q.runner.Clock.Now(),
	}
}

// callEnv is one running call: what its kind needs to run, and what its
// nested calls reach.
type callEnv struct {
	request  *request
	target   target
	id       string
	work     *store.Work
	layers   []policy.Layer
	input    map[string]any
	recorded []*store.Execution
}

func (e *callEnv) run(ctx context.Context) (any, *Failure) {
	t := e.target
	if t.compiled != nil {
		if err := t.compiled.ValidateInput(e.input); err != nil {
			return nil, NewFailure(CodeInputInvalid, inputMessage(err), "Call the tool with arguments that match its inputSchema (see tools/list).")
		}
	}
	if t.action.Native {
		if err := e.request.runner.validateNative(t.action.Definition.Name, e.input); err != nil {
			return nil, NewFailure(CodeInputInvalid, inputMessage(err), "Call the tool with arguments that match its inputSchema (see tools/list).")
		}
		switch t.action.Definition.Name {
		case action.NativeCEL:
			return e.nativeCEL(ctx, e.input)
		case action.NativeGraphQL:
			return e.nativeGraphQL(ctx, e.input)
		}
		return nil, NewFailure(CodeToolNotDeclared, "This native tool is not available on this server.", "")
	}
	switch t.action.Definition.Kind {
	case action.KindCEL:
		value, err := t.compiled.Expression().Eval(ctx, map[string]any{"event": map[string]any{"data": e.input}})
		if err != nil {
			return nil, celFailure(err)
		}
		return value, nil
	case action.KindGraphQL:
		return e.graphQLAction(ctx)
	case action.KindTool:
		return e.starlark(ctx)
	}
	return nil, NewFailure(CodeNotRunnable, fmt.Sprintf("Actions of kind %s cannot be called as tools yet.", t.action.Definition.Kind), "")
}

// validateNative checks a native tool's input against the schema the
// server lists for it, compiled once per runner.
func (r *Runner) validateNative(name string, input map[string]any) error {
	compiled, ok := r.natives.Load(name)
	if !ok {
		described, found := Lookup(name)
		if !found {
			return nil
		}
		c, err := action.Compile(action.Definition{Name: name, Kind: action.KindTool, Tool: &action.ToolBlock{InputSchema: described.InputSchema}})
		if err != nil {
			return err
		}
		compiled, _ = r.natives.LoadOrStore(name, c)
	}
	return compiled.(*action.Compiled).ValidateInput(input)
}

func inputMessage(err error) string {
	var aerr *action.Error
	if errors.As(err, &aerr) {
		return aerr.Message
	}
	return err.Error()
}

func celFailure(err error) *Failure {
	var cerr *expr.Error
	message := err.Error()
	if errors.As(err, &cerr) {
		message = cerr.Error()
	}
	return NewFailure(CodeCELEvaluation, message, "Fix the expression or the values it reads.")
}

func (e *callEnv) nativeCEL(ctx context.Context, input map[string]any) (any, *Failure) {
	expression, _ := input["expression"].(string)
	variables, _ := input["variables"].(map[string]any)
	value, err := e.request.runner.evalCEL(ctx, expression, variables)
	if err != nil {
		return nil, celFailure(err)
	}
	return map[string]any{"value": value}, nil
}

// evalCEL evaluates an expression in the environment of the native cel tool,
// which has the clock and randomness functions.
func (r *Runner) evalCEL(ctx context.Context, expression string, variables map[string]any) (any, error) {
	names := make([]string, 0, len(variables))
	for name := range variables {
		names = append(names, name)
	}
	env, err := expr.NewEnv(expr.Variables(names...), expr.Impure(r.Clock, r.Random))
	if err != nil {
		return nil, err
	}
	program, err := env.Compile(expression)
	if err != nil {
		return nil, err
	}
	return program.Eval(ctx, variables)
}

func (e *callEnv) nativeGraphQL(ctx context.Context, input map[string]any) (any, *Failure) {
	query, _ := input["query"].(string)
	variables, _ := input["variables"].(map[string]any)
	operation, _ := input["operationName"].(string)
	data, failure := e.graphQL(ctx, query, variables, operation)
	if failure != nil {
		return nil, failure
	}
	return map[string]any{"data": data}, nil
}

func (e *callEnv) graphQLAction(ctx context.Context) (any, *Failure) {
	config := e.target.action.Definition.Config
	document, _ := config["document"].(string)
	operation, _ := config["operationName"].(string)
	variables := map[string]any{}
	if fixed, ok := config["variables"].(map[string]any); ok {
		for k, v := range fixed {
			variables[k] = v
		}
	}
	for k, v := range e.input {
		variables[k] = v
	}
	return e.graphQL(ctx, document, variables, operation)
}

func (e *callEnv) graphQL(ctx context.Context, query string, variables map[string]any, operation string) (any, *Failure) {
	c := e.request.call
	data, err := e.request.runner.GraphQL.Execute(ctx, Operation{
		Account: c.Account, Work: e.work, Layers: e.layers, Claims: c.Who.Claims, Principal: c.Who.Principal,
		Query: query, Variables: variables, OperationName: operation,
	})
	if err != nil {
		return nil, asFailure(err)
	}
	return data, nil
}

// Failing is an error that carries a tool failure's code, message and hint.
type Failing interface {
	error
	ToolFailure() *Failure
}

func asFailure(err error) *Failure {
	var f Failing
	if errors.As(err, &f) {
		return f.ToolFailure()
	}
	var denied *policy.Denied
	if errors.As(err, &denied) {
		return NewFailure(denied.ErrorCode(), denied.Error(), denied.Hint()).WithDetail(denied.Detail())
	}
	return NewFailure(CodeFailure, err.Error(), "")
}
