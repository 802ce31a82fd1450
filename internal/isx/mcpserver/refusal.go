package mcpserver

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/template"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Code is a refusal's reason, in _meta["dev.incusspawn/error"].code. Only
// CodeBusy and CodeUnavailable may succeed when the same call is repeated
// unchanged. It is a string, as coded.Base carries it.
type Code = string

const (
	// CodeInvalidArgument: the arguments are malformed, name something
	// that no longer exists as an argument (max_turns), or repeat an
	// idempotency key for something else.
	CodeInvalidArgument Code = "invalid_argument"
	// CodeNotApproved: the template may not be used by an agent: mcp.yaml
	// does not approve it, it is project-local or untrusted, or it is not
	// built (the user must run isx build).
	CodeNotApproved Code = "not_approved"
	// CodeNotFound: no MCP instance or task of that name.
	CodeNotFound Code = "not_found"
	// CodeNotHeld: this session does not hold the instance (another
	// session does, or it is an orphan): adopt_instance first.
	CodeNotHeld Code = "not_held"
	// CodeWrongState: the instance or task is not in a state that allows
	// the call (stopped, still running, kept, held by a live session).
	CodeWrongState Code = "wrong_state"
	// CodeBusy: something else is working on the same thing right now.
	CodeBusy Code = "busy"
	// CodeLimit: mcp.yaml's max-instances or max-concurrent-tasks is
	// reached for this host user.
	CodeLimit Code = "limit"
	// CodeUnavailable: Incus or the instance cannot answer now.
	CodeUnavailable Code = "unavailable"
	// CodeTaskFailed: a background task was asked for but its command
	// could not be started in the instance.
	CodeTaskFailed Code = "task_failed"
	// CodeRefused: host policy refuses the call: mcp.yaml cannot be used,
	// the old mcp: section of config.yaml, another host user's instance.
	CodeRefused Code = "refused"
	// CodeInternal: something isx did not expect, or the audit log cannot
	// be written (no call runs unrecorded).
	CodeInternal Code = "internal"
)

// Codes lists every refusal code.
var Codes = []Code{CodeInvalidArgument, CodeNotApproved, CodeNotFound, CodeNotHeld, CodeWrongState,
	CodeBusy, CodeLimit, CodeUnavailable, CodeTaskFailed, CodeRefused, CodeInternal}

// ErrorMetaKey is the _meta key of a refusal's details.
const ErrorMetaKey = "dev.incusspawn/error"

// A refusal is a tool call that did not do what was asked: a result with
// isError, no structuredContent and the code in _meta, with the instance
// and task it concerns when there are. Handlers return any error: the
// domains' coded errors, Incus's, their own refusals (refusef, with one of
// Codes); handle turns each into a refusal once, at the wire (refusalOf).

// What a refusal concerns, the coded errors' About and the keys of _meta.
const (
	aboutInstance = "instance"
	aboutTask     = "task_id"
)

func refusef(code Code, format string, args ...any) *coded.Error {
	return coded.New(code, format, args...)
}

// refuseWith is a refusal caused by err, whose message ends the sentence.
func refuseWith(code Code, err error, format string, args ...any) *coded.Error {
	return coded.Wrap(code, err, format, args...)
}

// on says which instance (and task) a failure concerns, leaving its
// translation to the wire; it names nothing a failure names already.
func on(err error, instance, taskID string) error {
	if err == nil {
		return nil
	}
	return coded.Wrap("", err, "").On(aboutInstance, instance).On(aboutTask, taskID)
}

// refusalStyle is how a refusal reads: "Refused (<code>): <message>" for
// the model, the details under ErrorMetaKey for a program.
var refusalStyle = mcpkit.ErrorStyle{
	MetaKey: ErrorMetaKey,
	Text:    func(e mcpkit.ToolError) string { return "Refused (" + e.Code + "): " + e.Message },
}

// refusalResult is a refusal as a tool result.
func refusalResult(r *coded.Error) *mcp.CallToolResult {
	facts := map[string]any{}
	for _, what := range []string{aboutInstance, aboutTask} {
		if name := r.About[what]; name != "" {
			facts[what] = name
		}
	}
	return refusalStyle.Result(mcpkit.ToolError{Code: r.Code, Message: r.Error(), Facts: facts})
}

// refusalCodes are the refusal codes of the domains' codes that are not
// refusal codes themselves (the task and holding packages use the same
// words); any other is CodeInternal.
var refusalCodes = map[string]Code{
	instance.CodeExists:   CodeBusy,
	instance.CodeNotBuilt: CodeNotApproved,
	// Incus could not make or start the copy, and nothing of it is left:
	// a retry may well succeed.
	instance.CodeBranchFailed: CodeUnavailable,
}

func init() {
	for _, code := range Codes {
		refusalCodes[code] = code
	}
}

// refusalOf is the one translation of any failure into a refusal with the
// code a program can branch on, naming what the failure concerns.
func refusalOf(err error) *coded.Error {
	r := translate(err)
	return r.On(aboutInstance, coded.AboutOf(err, aboutInstance)).On(aboutTask, coded.AboutOf(err, aboutTask))
}

func translate(err error) *coded.Error {
	var (
		cfgErr *config.Error
		tplErr *template.Error
	)
	c := coded.Of(err)
	switch {
	case c == nil || incus.Reported(err):
		return incusRefusal(err)
	case errors.As(err, &cfgErr) && &cfgErr.Base == c:
		return refusef(CodeRefused, "%s", cfgErr.Error())
	case errors.As(err, &tplErr) && &tplErr.Base == c && c.Code == template.CodeNotApproved:
		return refusef(CodeNotApproved, "%s", c.Message)
	case tplErr != nil && &tplErr.Base == c:
		return refusef(CodeRefused, "the template definitions cannot be read, so isx cannot tell which templates may be used; the user must fix: %s", tplErr.Error())
	}
	code, known := refusalCodes[c.Code]
	if !known {
		code = CodeInternal
	}
	// Incus not answering may pass, whatever the domain called it.
	if errors.Is(c.Err, incus.ErrUnavailable) {
		code = CodeUnavailable
	}
	return refuseWith(code, c.Err, "%s", c.Message)
}

// incusRefusal is a failure Incus reported, or one isx did not expect.
func incusRefusal(err error) *coded.Error {
	switch {
	case holding.InstanceBusy(err):
		return refuseWith(CodeBusy, err, "Incus is running another operation on the instance; retry shortly")
	case errors.Is(err, incus.ErrUnavailable):
		return refuseWith(CodeUnavailable, err, "Incus does not answer, so isx cannot reach the instances; ask the user to start the Incus daemon")
	case errors.Is(err, incus.ErrNotFound):
		return refuseWith(CodeNotFound, err, "Incus has no such instance")
	case errors.Is(err, incus.ErrConflict):
		return refuseWith(CodeBusy, err, "the instance changed while isx was working on it; retry")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return refuseWith(CodeUnavailable, err, "the call was interrupted before it finished; retry")
	}
	return refuseWith(CodeInternal, err, "isx failed unexpectedly")
}
