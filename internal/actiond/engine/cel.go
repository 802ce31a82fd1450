package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

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
// describes, as a map (see nativeGraphQL). Each variable takes the type of
// its value; a value decoded from JSON reads a whole number as an int
// (expr.JSONNumbers), so {"x": 41} makes x + 1 the int 42.
func (e *callEnv) nativeCEL(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(celTool, input)
	if failure != nil {
		return nil, failure
	}
	vars := variables(input)
	if e.fromJSON && vars != nil {
		vars = expr.JSONNumbers(vars).(map[string]any)
	}
	value, err := e.request.runner.evalCEL(ctx, args.Expression, vars)
	if err != nil {
		return nil, celFailure(err)
	}
	return map[string]any{"value": value}, nil
}

// evalCEL evaluates an expression in the environment of the native cel tool,
// which has the clock and randomness functions. Environments are kept by
// the names and types of the variables, and compiled expressions with
// them: a program's 64 cel calls compile each expression once.
func (r *Runner) evalCEL(ctx context.Context, expression string, variables map[string]any) (any, error) {
	program, err := r.celPrograms.get(expression, variables, func() (*expr.Env, error) {
		return expr.NewEnv(expr.VariablesOf(variables), expr.Impure(r.clock(), r.random()))
	})
	if err != nil {
		return nil, err
	}
	return program.Eval(ctx, variables)
}

// celCache keeps the native cel tool's environments and programs, a bounded
// number of each.
type celCache struct {
	mu       sync.Mutex
	envs     map[string]*expr.Env
	programs map[string]*expr.Program
}

const celCacheSize = 1024

func (c *celCache) get(expression string, variables map[string]any, newEnv func() (*expr.Env, error)) (*expr.Program, error) {
	signature := celSignature(variables)
	key := signature + "\x00" + expression
	c.mu.Lock()
	program, ok := c.programs[key]
	env := c.envs[signature]
	c.mu.Unlock()
	if ok {
		return program, nil
	}
	if env == nil {
		var err error
		if env, err = newEnv(); err != nil {
			return nil, err
		}
	}
	program, err := env.Compile(expression)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.envs == nil || len(c.envs) >= celCacheSize {
		c.envs = map[string]*expr.Env{}
	}
	if c.programs == nil || len(c.programs) >= celCacheSize {
		c.programs = map[string]*expr.Program{}
	}
	c.envs[signature], c.programs[key] = env, program
	return program, nil
}

// celSignature names the variables and the kinds of their values.
func celSignature(variables map[string]any) string {
	names := slices.Sorted(maps.Keys(variables))
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(fmt.Sprintf("%T", variables[name]))
		b.WriteByte(';')
	}
	return b.String()
}

// celAction runs an action of kind cel: its compiled expression, reading
// the call's input as event.data, with the numbers its input schema calls
// integers as CEL ints.
func (e *callEnv) celAction(ctx context.Context) (any, *Failure) {
	data := expr.Integers(e.input, action.InputSchema(e.target.action))
	value, err := e.target.compiled.Expression().Eval(ctx, map[string]any{"event": map[string]any{"data": data}})
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
