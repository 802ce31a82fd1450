// Package starlark runs Starlark scripts for actions of kind tool and, on
// the same runtime, the programs external agents pass to the native program
// tool.
//
// A script defines run(event), reads its input as event["data"], calls
// other tools as tools.<name>(input), may call graphql(document,
// variables=None, operation_name=None) and cel(expression, vars=None), and
// returns its result. Run executes one; Check analyses one before it runs.
//
// The dialect is standard Starlark with set(): no while loops, no recursion,
// no top-level if/for, no load. A script cannot reach the filesystem, the
// environment, the network or the clock; print output is discarded.
//
// Builtins besides Starlark's universe (fail, len, sorted …):
//
//	json      go.starlark.net/lib/json: json.encode, json.decode, json.indent
//	struct    starlarkstruct.Make: struct(a=1); a struct's JSON form is an object
//	tools     tools.<name>(input={}, check=True)
//	graphql   graphql(document, variables=None, operation_name=None, check=True)
//	cel       cel(expression, vars=None, check=True)
//	decimal, money, date, uuid: CEL's pure functions (see cel.go)
//
// A call with check=False does not fail the script on a tool error; it
// returns {"ok": True, "value": <output>} or {"ok": False, "error": {"code":
// …, "message": …, "hint": …}}. With the default check=True a call returns its
// output and a tool error ends the script with the tool's code and hint.
package starlark

import (
	"context"
	"errors"
	"fmt"

	star "go.starlark.net/starlark"

	"github.com/incusspawn/isx/internal/coded"
)

// Script is one Starlark source. Name is the file name its tracebacks show:
// "program.star" for a program, "<action name>.star" for a tool.
type Script struct {
	Name   string
	Source string
}

// Limits bound one run. A zero field takes its default.
type Limits struct {
	MaxSteps        uint64 // Starlark execution steps, default 1,000,000
	MaxToolCalls    int    // tools.<name>() calls, default 64
	MaxGraphQLCalls int    // graphql() calls, default 64
	MaxCELCalls     int    // cel() calls, default 64
	// MaxAllocBytes is what the run may allocate in all, together with
	// the runs beneath it (a program's Starlark tools); default
	// DefaultMaxAllocBytes (budget.go).
	MaxAllocBytes int64
	// Gate, when set, bounds the runs of the process at once; a run
	// beneath another takes no place of its own.
	Gate *Gate
}

// Defaults of Limits.
const (
	DefaultMaxSteps = 1_000_000
	DefaultMaxCalls = 64
)

func (l Limits) withDefaults() Limits {
	if l.MaxSteps == 0 {
		l.MaxSteps = DefaultMaxSteps
	}
	if l.MaxToolCalls <= 0 {
		l.MaxToolCalls = DefaultMaxCalls
	}
	if l.MaxGraphQLCalls <= 0 {
		l.MaxGraphQLCalls = DefaultMaxCalls
	}
	if l.MaxCELCalls <= 0 {
		l.MaxCELCalls = DefaultMaxCalls
	}
	return l
}

// run is the state of one execution, reachable from builtins through the
// thread.
type run struct {
	ctx    context.Context
	file   string
	host   Host
	limits Limits
	budget *budget

	toolCalls, graphqlCalls, celCalls int

	stepsExceeded bool
	// extraSteps are the steps the rewrite's builtins took beyond what the
	// script wrote, given back to the step limit (guarded.go).
	extraSteps uint64
	// hostErr is a failure of the host rather than of a call; it ends the
	// script whatever check says.
	hostErr error
}

const runKey = "isx.starlark.run"

// runContextKey carries the run into the host's calls, so that a run
// beneath it (a Starlark tool a program calls) shares its budget and its
// place at the gate.
type runContextKey struct{}

func runOf(thread *star.Thread) *run {
	r, _ := thread.Local(runKey).(*run)
	return r
}

// Run executes script: it runs the top level, then calls run(event) and
// returns its result as a JSON-able Go value. event is what the script sees
// as event, {"data": <input>} at least. A compiled script is cached by its
// name and source, so only the first run of a source parses it.
//
// A failure of the script is an *Error: CodeInputInvalid when the script is
// refused before it runs (see Check); otherwise the code of the tool error it
// did not handle, CodeToolNotDeclared, CodeLimitExceeded, CodeDeadlineExceeded
// or CodeCancelled when ctx ended it, or CodeActionFailure. Any other error is
// the host's own failure, wrapped.
func Run(ctx context.Context, script Script, event map[string]any, host Host, limits Limits) (any, error) {
	script = script.named()
	compiled, err := compile(script)
	if err != nil {
		return nil, err
	}
	eventValue, err := fromJSON(event, nil)
	if err != nil {
		return nil, &Error{Base: coded.Base{Code: CodeInputInvalid, Message: "the event is not JSON: " + err.Error(), Err: err}}
	}
	if ctx.Err() != nil {
		return nil, stopped(ctx, "the script was stopped before it ran: "+context.Cause(ctx).Error())
	}

	r := &run{file: script.Name, host: host, limits: limits.withDefaults()}
	if parent, ok := ctx.Value(runContextKey{}).(*run); ok {
		r.budget = parent.budget
	} else {
		r.budget = newBudget(r.limits.MaxAllocBytes)
		if r.limits.Gate != nil {
			release, err := r.limits.Gate.enter(ctx)
			if err != nil {
				return nil, err
			}
			defer release()
		}
		defer r.budget.collect()
	}
	r.ctx = context.WithValue(ctx, runContextKey{}, r)
	thread := r.newThread()
	stop := context.AfterFunc(ctx, func() { thread.Cancel("stopped") })
	defer stop()

	globals, err := compiled.program.Init(thread, r.predeclared(compiled.predeclared))
	if err != nil {
		return nil, r.failure(err)
	}
	result, err := star.Call(thread, globals[runName], star.Tuple{eventValue}, nil)
	if err != nil {
		return nil, r.failure(err)
	}
	out, err := r.toJSON(result, "the value run returned")
	var limited *Error
	if errors.As(err, &limited) {
		return nil, limited
	}
	if err != nil {
		return nil, &Error{Base: coded.Base{
			Code:    CodeActionFailure,
			Message: "Error: " + err.Error(),
			Hint:    "Return None, a bool, number, string, list, tuple, dict with string keys, or struct of those.",
		}}
	}
	return out, nil
}

// newThread makes the run's thread: no print, no load, the step limit, and
// the run reachable from builtins.
func (r *run) newThread() *star.Thread {
	thread := &star.Thread{
		Name:  r.file,
		Print: func(*star.Thread, string) {},
		Load:  refuseLoad,
		OnMaxSteps: func(thread *star.Thread) {
			r.stepsExceeded = true
			thread.Cancel("too many steps")
		},
	}
	thread.SetMaxExecutionSteps(r.limits.MaxSteps)
	thread.SetLocal(runKey, r)
	return thread
}

func refuseLoad(*star.Thread, string) (star.StringDict, error) {
	return nil, fmt.Errorf("load is not available: a script is one file")
}
