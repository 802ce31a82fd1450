package engine

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/expr"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// celArgs are the native cel tool's arguments.
type celArgs struct {
	Expression string         `json:"expression" jsonschema:"The CEL expression." minLength:"1"`
	Variables  map[string]any `json:"variables,omitempty" jsonschema:"Variables the expression reads, by name."`
}

// celResult is what the native cel tool answers.
type celResult struct {
	Value any `json:"value" jsonschema:"The expression's value."`
}

var celTool = mcpkit.NewTool[celArgs, celResult](mcpkit.Spec{
	Name: action.NativeCEL,
	Description: "Evaluates one CEL expression. The platform's functions are available (decimal, money, date, uuid, timestamp, " +
		"duration, strings), and so are uuid.New() and time.Now(). Pass expression, and variables: an object whose keys " +
		"become variables of the expression. Answers with value.",
	Types: []mcpkit.TypeSchema{jsonObject},
})

// nativeCEL runs the native cel tool; its output is the object celResult
// describes, as a map (see nativeGraphQL).
func (e *callEnv) nativeCEL(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(celTool, input)
	if failure != nil {
		return nil, failure
	}
	value, err := e.request.runner.evalCEL(ctx, args.Expression, variables(input))
	if err != nil {
		return nil, celFailure(err)
	}
	return map[string]any{"value": value}, nil
}

// evalCEL evaluates an expression in the environment of the native cel tool,
// which has the clock and randomness functions.
func (r *Runner) evalCEL(ctx context.Context, expression string, variables map[string]any) (any, error) {
	names := slices.Collect(maps.Keys(variables))
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

// celAction runs an action of kind cel: its compiled expression, reading
// the call's input as event.data.
func (e *callEnv) celAction(ctx context.Context) (any, *Failure) {
	value, err := e.target.compiled.Expression().Eval(ctx, map[string]any{"event": map[string]any{"data": e.input}})
	if err != nil {
		return nil, celFailure(err)
	}
	return value, nil
}

func celFailure(err error) *Failure {
	var cerr *expr.Error
	message := err.Error()
	if errors.As(err, &cerr) {
		message = cerr.Error()
	}
	return NewFailure(CodeCELEvaluation, message, "Fix the expression or the values it reads.")
}
