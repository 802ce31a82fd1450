package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/starlark"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// The native tool program runs a Starlark program the external agent
// writes, with the conventions of a Starlark tool, against the tools the
// server lists: each call authorized and recorded as the same call made
// alone would be, all of them committed together or none (seed 004,
// "Programs").

// programFile is the name a program's tracebacks show.
const programFile = "program.star"

// MaxProgramSource bounds a program's source, in bytes.
const MaxProgramSource = 256 << 10

// programArgs are the native program tool's arguments.
type programArgs struct {
	Source string         `json:"source" jsonschema:"The program: Starlark that defines run(event), reads its input as event[\"data\"], calls the server's tools as tools.<name>(input) (check=False returns {ok, value or error} instead of failing), graphql(document, variables, operation_name) and cel(expression, vars) when the server lists them, and returns its result." minLength:"1" maxLength:"262144"`
	Input  map[string]any `json:"input,omitempty" jsonschema:"What the program reads as event[\"data\"]; {} when left out."`
	Commit bool           `json:"commit,omitempty" jsonschema:"true commits every write the program's calls make, all together; false, the default, runs every call and commits none, answering with the rows it would write."`
}

// programResult is what program answers: value alone for a commit; for a
// preview also the rows it would write that you may read, and how many it
// left out. It describes the schema; the answer is built as a map, so that
// a preview's empty writes and zero counts are sent.
type programResult struct {
	Value            any            `json:"value" jsonschema:"What run returned."`
	Writes           []previewWrite `json:"writes,omitempty" jsonschema:"A preview's rows it would write that you may read: table, key and new value."`
	UnreadableWrites int            `json:"unreadable_writes,omitempty" jsonschema:"A preview's rows left out of writes because you may not read them, or because they are deleted." minimum:"0"`
	OmittedWrites    int            `json:"omitted_writes,omitempty" jsonschema:"A preview's rows left out of writes because the result reached its size limit." minimum:"0"`
}

// previewWrite is one row a preview would write.
type previewWrite struct {
	Table string `json:"table" jsonschema:"The row's table, such as KVValue."`
	Key   string `json:"key" jsonschema:"The row's key in its table."`
	Value any    `json:"value" jsonschema:"The row's new value."`
}

var programTool = mcpkit.NewTool[programArgs, programResult](mcpkit.Spec{
	Name: action.NativeProgram,
	Description: "Runs a Starlark program that calls this server's tools, as one transaction: every call commits together, or none does, " +
		"and an error the program does not handle rolls every write back. Pass source (defining run(event)), input, and commit: " +
		"false (the default) previews, answering with value and the rows it would write; true commits, answering with value. " +
		"Its GraphQL documents and tools are checked before anything runs. At most 64 tool calls, 64 graphql and 64 cel calls, " +
		"and 1,000,000 steps; it cannot call program, invoke, get_task, cancel_task or a callable agent. The clock and randomness " +
		"(uuid.New(), time.Now()) are cel calls; decimal, money, date and uuid are builtins.",
	Types: []mcpkit.TypeSchema{jsonObject},
})

// nativeProgram runs the native program tool.
func (e *callEnv) nativeProgram(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(programTool, input)
	if failure != nil {
		return nil, failure
	}
	offer := e.request.call.Offer
	if offer == nil {
		return nil, NewFailure(CodeNotRunnable, "A program runs only as a call of an MCP server's request.", "Call program through an MCP server that lists it.")
	}
	if !args.Commit {
		e.preview, e.discard = true, true
	}
	script := starlark.Script{Name: programFile, Source: args.Source}
	if failure := e.checkProgram(script); failure != nil {
		return nil, failure
	}
	data := args.Input
	if data == nil {
		data = map[string]any{}
	}
	value, err := starlark.Run(ctx, script, map[string]any{"data": data}, &programHost{calls: calls{env: e}, offer: offer}, e.request.runner.Starlark)
	if err != nil {
		return nil, scriptFailure(ctx, err, "program")
	}
	if !e.discard {
		return map[string]any{"value": value}, nil
	}
	writes, unreadable, omitted := e.previewWrites(ctx)
	return map[string]any{"value": value, "writes": writes, "unreadable_writes": unreadable, "omitted_writes": omitted}, nil
}

// scriptFailure is a failed script as a call's failure: its code, the
// message led by the traceback of its own source, its hint, and in the
// record the failed call's own detail (a denial's principal, policy and
// action), which the message leaves out.
func scriptFailure(ctx context.Context, err error, what string) *Failure {
	if ctx.Err() != nil {
		return NewFailure(CodeTimeout, "The "+what+" stopped at its deadline.", "Make the call do less, or ask the "+what+"'s owner to raise its execution.responseTimeout.")
	}
	var serr *starlark.Error
	if !errors.As(err, &serr) {
		return NewFailure(CodeFailure, "The "+what+" failed.", "Read the call's execution for what went wrong, fix the cause, and call again.").WithDetail(err.Error())
	}
	failure := NewFailure(serr.Code, serr.Message, serr.Hint)
	var call *Failure
	if errors.As(serr.Err, &call) {
		return failure.WithDetail(map[string]any{"call": map[string]any{"code": call.Code, "message": call.Message, "hint": call.Hint, "detail": call.Detail}})
	}
	return failure.WithDetail(detail(serr.Err))
}

// checkProgram refuses, before anything runs, a program whose tools the
// server does not offer, or whose GraphQL documents known from the source
// fail the schema, name an operation the document lacks, or leave out a
// variable it requires (ACT-332..339).
func (e *callEnv) checkProgram(script starlark.Script) *Failure {
	analysis, err := starlark.Check(script)
	if err != nil {
		var serr *starlark.Error
		if errors.As(err, &serr) {
			return NewFailure(CodeInputInvalid, serr.Message, serr.Hint)
		}
		return NewFailure(CodeInputInvalid, err.Error(), "Fix the program and call again.")
	}
	offer := e.request.call.Offer
	var problems []string
	for _, name := range analysis.ToolNames {
		if reason := programReaches(offer, name); reason != "" {
			problems = append(problems, fmt.Sprintf("%s: %s", analysis.ToolPositions[name], reason))
		}
	}
	if lists(offer, action.NativeGraphQL) {
		for _, use := range analysis.GraphQL {
			if problem := e.checkDocument(use); problem != "" {
				problems = append(problems, problem)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return NewFailure(CodeInputInvalid, "The program was refused before it ran, and made no call:\n"+strings.Join(problems, "\n"),
		"Fix what each line names, and call program again.")
}

// checkDocument checks one document the analysis found, and says what is
// wrong with it and how it reaches its call.
func (e *callEnv) checkDocument(use starlark.GraphQLUse) string {
	if !use.OperationNameKnown {
		return "" // the operation is chosen at run time, and checked then
	}
	required, err := e.request.runner.GraphQL.Validate(use.Document, use.OperationName)
	if err != nil {
		return fmt.Sprintf("%s: the GraphQL document that %s is invalid: %v", use.Call, use.Describe(), err)
	}
	if !use.VariablesKnown {
		return ""
	}
	var missing []string
	for _, name := range required {
		if !slices.Contains(use.Variables, name) {
			missing = append(missing, "$"+name)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the GraphQL document that %s requires the variables %s, which the call does not pass", use.Call, use.Describe(), strings.Join(missing, ", "))
}

// programReaches says why a program cannot call tools.<name>, or "" when
// it can: the server lists it, and it is neither a native tool (graphql()
// and cel() are builtins; program, invoke and the task tools never run
// inside a program) nor a callable agent, which runs only as a task.
func programReaches(offer Offer, name string) string {
	if action.IsNative(name) {
		switch name {
		case action.NativeGraphQL, action.NativeCEL:
			return fmt.Sprintf("tools.%s is not how a program calls %s: call the builtin %s() instead", name, name, name)
		}
		return fmt.Sprintf("a program cannot call %s", name)
	}
	tool, ok := offer.Tool(name)
	if !ok {
		return fmt.Sprintf("tools.%s is not a tool this server offers", name)
	}
	if tool.Target.Definition.IsCallableAgent() {
		return fmt.Sprintf("%s is a callable agent, which runs only as a task: a program cannot call it", name)
	}
	return ""
}

// programHost is what a program reaches: the server's tools through the
// server's references, and graphql() and cel() when the server lists them.
type programHost struct {
	calls
	offer Offer
}

func (h *programHost) HasTool(name string) bool { return programReaches(h.offer, name) == "" }

func (h *programHost) HasNative(name string) bool { return lists(h.offer, name) }

func (h *programHost) CallTool(ctx context.Context, name string, input any) (any, error) {
	if reason := programReaches(h.offer, name); reason != "" {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeToolNotDeclared, Message: reason}}
	}
	tool, _ := h.offer.Tool(name)
	return h.throughServer(ctx, tool, nil, input)
}

// throughServer calls a tool the server lists as the server's reference
// does: at its version, with its fixed input over the caller's own (none,
// or a draft's).
func (c calls) throughServer(ctx context.Context, tool Offered, own func(map[string]any) (map[string]any, error), input any) (any, error) {
	arguments, err := toObject(input)
	if err != nil {
		return nil, &starlark.Error{Base: coded.Base{Code: starlark.CodeInputInvalid, Message: "tools." + tool.Name + " takes an object: " + err.Error()}}
	}
	if own != nil {
		if arguments, err = own(arguments); err != nil {
			return nil, &starlark.Error{Base: coded.Base{Code: CodeCELEvaluation, Message: "The fixed input for " + tool.Name + " could not be evaluated.", Err: err}}
		}
	}
	effective, err := c.env.request.call.Offer.FixedInput(ctx, tool.Ref, arguments)
	if err != nil {
		return nil, &starlark.Error{Base: coded.Base{Code: CodeCELEvaluation, Message: "The server's fixed input for " + tool.Name + " could not be evaluated.", Err: err}}
	}
	return c.tool(ctx, target{action: tool.Target, compiled: tool.Compiled}, effective)
}
