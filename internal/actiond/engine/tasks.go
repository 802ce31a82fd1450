package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// A callable agent runs only as a task: a started execution, queued in the
// store and run by a worker of any process sharing it. This file is what a
// task is to the engine and its callers — starting one (StartTask, the one
// function a tools/call of an agent and an invoke of one both use), reading
// and cancelling one within a request's scope, and how its execution's
// status reads as the Tasks extension's — and the native tools get_task and
// cancel_task, which offer the same to clients without the extension. The
// workers that run tasks are package tasks, which implements Tasks.

// Codes of task calls and reads.
const (
	CodeStartLimit   = "start_limit"
	CodeTaskNotFound = "mcp_task_not_found"
	CodeTaskRequired = "mcp_task_required"
	// CodeTaskFailed is the code a task's read carries when its execution
	// recorded none.
	CodeTaskFailed = "task_failed"
)

// What every task answer says of how long it is kept and how often to poll.
const (
	TaskTTL          = 24 * time.Hour
	TaskPollInterval = 5 * time.Second
)

// ErrTaskNotFound is a task that cannot be reached from the scope asking:
// unknown, of another session, or of another server, indistinguishably.
var ErrTaskNotFound = coded.New(CodeTaskNotFound, "No such task can be reached from this session.").
	WithHint("Use a task_id that a call in this session returned.")

// ErrStartLimit is a start refused because the session or the user already
// has as many unfinished tasks as allowed.
var ErrStartLimit = coded.New(CodeStartLimit, "This session, or you across this server's sessions, already has 32 unfinished tasks.").
	WithHint("Wait for a task to finish, or cancel one with cancel_task or tasks/cancel, then call again.")

// Tasks starts, reads and cancels tasks; package tasks implements it.
type Tasks interface {
	// Start records the task and queues it: when Start returns, the task
	// can be read at once. A start beyond the limits is ErrStartLimit.
	Start(ctx context.Context, start TaskStart) (Task, error)
	// Get reads a task the scope can reach, or ErrTaskNotFound.
	Get(ctx context.Context, scope TaskScope, id string) (Task, error)
	// Cancel cancels a task the scope can reach (a finished one stays as
	// it is), or ErrTaskNotFound.
	Cancel(ctx context.Context, scope TaskScope, id string, by CancelledBy) (Task, error)
}

// TaskScope is who may reach a task: requests to one server, in one session,
// by one principal and user.
type TaskScope struct {
	Account   string
	ServerID  string
	SessionID string
	Principal string
	Subject   string
}

// ServerRef names the MCP server a request was made to.
type ServerRef struct {
	ID      string `json:"id"`
	Version int64  `json:"version"`
	Name    string `json:"name"`
}

// TaskStart is what a task is started with.
type TaskStart struct {
	Scope  TaskScope
	Server ServerRef
	// Agent is the callable agent at the version the reference resolved
	// to; Input its effective input, fixed input applied.
	Agent action.Target
	Input map[string]any
	Who   *auth.Identity
	// StartedBy is the request that starts the task.
	StartedBy string
	Preview   bool
	// Draft is, for an invoke of an unpublished definition, that
	// definition with its references resolved: the agent runs it instead
	// of Agent's, and each of its tools that the server lists goes through
	// the server's reference, as Through says.
	Draft   json.RawMessage
	Through map[string]Through
}

// CancelledBy is who cancelled a task, and with which request: the
// execution's cancelledBy.
type CancelledBy struct {
	Principal   string `json:"principal"`
	Subject     string `json:"subject"`
	ExecutionID string `json:"executionId"`
}

// Task is a task as its reader sees it.
type Task struct {
	ID string
	// Status is the execution's status (store.Queued …).
	Status    string
	CreatedAt time.Time
	// UpdatedAt is when the execution last changed.
	UpdatedAt time.Time
	Preview   bool
	// Output is a SUCCEEDED task's output.
	Output any
	// Failure is a FAILED or EXHAUSTED task's code and hint, the hint
	// naming a denying layer by name alone; its message is the reader's
	// fixed sentence.
	Failure *Failure
}

// Finished says whether the task ended.
func (t Task) Finished() bool { return t.WireStatus().Finished() }

// WireStatus is the Tasks extension's status of the task (seed 004's table).
func (t Task) WireStatus() mcpkit.TaskStatus {
	switch t.Status {
	case store.Succeeded, store.Failed:
		return mcpkit.TaskCompleted
	case store.Exhausted:
		return mcpkit.TaskFailed
	case store.Cancelled:
		return mcpkit.TaskCancelled
	}
	return mcpkit.TaskWorking
}

// The fixed sentences of a task that did not succeed.
const (
	TaskFailedMessage    = "The task's agent failed"
	TaskExhaustedMessage = "The task's agent failed, and its retries ran out."
)

// Wire is the task as the extension carries it.
func (t Task) Wire() mcpkit.Task {
	ttl := TaskTTL.Milliseconds()
	wire := mcpkit.Task{
		TaskID:         t.ID,
		Status:         t.WireStatus(),
		CreatedAt:      mcpkit.TimeString(t.CreatedAt),
		LastUpdatedAt:  mcpkit.TimeString(t.UpdatedAt),
		TTLMs:          &ttl,
		PollIntervalMs: TaskPollInterval.Milliseconds(),
	}
	if t.Status == store.Exhausted {
		wire.StatusMessage = TaskExhaustedMessage
	}
	return wire
}

// Error is an EXHAUSTED task's JSON-RPC error: -32603 with the execution's
// code and hint in data.
func (t Task) Error() *mcpkit.TaskError {
	if t.Status != store.Exhausted {
		return nil
	}
	code, hint := t.failureCode()
	data := map[string]any{"code": code}
	if hint != "" {
		data["hint"] = hint
	}
	return &mcpkit.TaskError{Code: -32603, Message: TaskExhaustedMessage, Data: data}
}

// ToolFailure is a FAILED task's result: a tool error with the execution's
// code, the fixed message and its hint.
func (t Task) ToolFailure() *Failure {
	if t.Status != store.Failed {
		return nil
	}
	code, hint := t.failureCode()
	return NewFailure(code, TaskFailedMessage, hint)
}

func (t Task) failureCode() (string, string) {
	if t.Failure == nil || t.Failure.Code == "" {
		return CodeTaskFailed, "Read the task's execution for what went wrong, or start the task again."
	}
	return t.Failure.Code, t.Failure.Hint
}

// StartTask starts the callable agent a call names, as a task beneath its
// request: the input is validated against the agent's inputSchema first,
// and a start beyond the session's or the user's limit is a start_limit
// failure that starts nothing. Who may be answered with a task (a client
// with the Tasks extension, or one of a server listing get_task and
// cancel_task) is the caller's to decide.
func (r *Runner) StartTask(ctx context.Context, c *Call) (Task, *Failure) {
	return r.startTask(ctx, c, nil, nil)
}

// startTask starts c's agent; for an invoke of a draft, draft is the
// definition that runs, its references resolved, and through the server's
// references its tools go through.
func (r *Runner) startTask(ctx context.Context, c *Call, draft json.RawMessage, through map[string]Through) (Task, *Failure) {
	tasks := c.tasks(r)
	if tasks == nil {
		return Task{}, NewFailure(CodeNotRunnable, "This actiond runs no tasks, so a callable agent cannot be started.",
			"Ask the operator to run actiond with its task workers.")
	}
	if !c.Target.Definition.IsCallableAgent() {
		return Task{}, NewFailure(CodeNotRunnable, "Only a callable agent runs as a task.", "Call the tool directly.")
	}
	if c.Compiled != nil {
		if err := c.Compiled.ValidateInput(c.Input); err != nil {
			return Task{}, inputInvalid(err)
		}
	}
	task, err := tasks.Start(ctx, TaskStart{
		Scope:     c.Scope(),
		Server:    c.Server,
		Agent:     c.Target,
		Input:     c.Input,
		Who:       c.Who,
		StartedBy: c.ParentID,
		Preview:   c.Preview,
		Draft:     draft,
		Through:   through,
	})
	if errors.Is(err, ErrStartLimit) {
		return Task{}, NewFailure(CodeStartLimit, ErrStartLimit.Message, ErrStartLimit.Hint)
	}
	if err != nil {
		return Task{}, NewFailure(CodeFailure, "The task could not be started.", "Call again; nothing was started.").WithDetail(err.Error())
	}
	return task, nil
}

// Scope is the task scope of the call's request.
func (c *Call) Scope() TaskScope {
	return TaskScope{Account: c.Account, ServerID: c.Server.ID, SessionID: c.SessionID, Principal: c.Who.Principal, Subject: c.Who.Subject}
}

// taskIDArgs are get_task's and cancel_task's arguments. The stated intent
// is the server's to add, as for every tool.
type taskIDArgs struct {
	TaskID string `json:"task_id" jsonschema:"The task_id a call returned." minLength:"1" maxLength:"128"`
}

// taskAnswer is what get_task answers.
type taskAnswer struct {
	TaskID string `json:"task_id" jsonschema:"The task."`
	Status string `json:"status" jsonschema:"working, completed, failed or cancelled." enum:"working|completed|failed|cancelled"`
	// PollIntervalMs is set while the task is working.
	PollIntervalMs int64       `json:"poll_interval_ms,omitempty" jsonschema:"While the task is working: how long to wait before reading it again, in milliseconds."`
	Result         *taskResult `json:"result,omitempty" jsonschema:"A completed task's result, rendered as a tools/call result."`
	Error          *taskError  `json:"error,omitempty" jsonschema:"A failed task's error."`
}

// taskResult is a completed task's result: the agent's output once, as
// structuredContent when it has one, else as text; or a tool error.
type taskResult struct {
	Content           []textContent  `json:"content,omitempty" jsonschema:"The agent's output as text, when it is not an object, or the tool error's message."`
	StructuredContent any            `json:"structuredContent,omitempty" jsonschema:"The agent's output, when it is an object."`
	IsError           bool           `json:"isError,omitempty" jsonschema:"True when the agent failed."`
	Meta              map[string]any `json:"_meta,omitempty" jsonschema:"The tool error's code, message and hint, under com.twisp/error."`
}

type textContent struct {
	Type string `json:"type" jsonschema:"Always text." enum:"text"`
	Text string `json:"text" jsonschema:"The text."`
}

// taskError is a failed task's JSON-RPC error.
type taskError struct {
	Code    int64         `json:"code" jsonschema:"-32603."`
	Message string        `json:"message" jsonschema:"What happened."`
	Data    taskErrorData `json:"data" jsonschema:"The execution's error code and hint."`
}

type taskErrorData struct {
	Code string `json:"code" jsonschema:"The execution's error code."`
	Hint string `json:"hint,omitempty" jsonschema:"What to do about it."`
}

// cancelAnswer is what cancel_task answers.
type cancelAnswer struct {
	TaskID string `json:"task_id" jsonschema:"The task."`
	Hint   string `json:"hint" jsonschema:"What the cancellation did and what to do next."`
}

var getTaskTool = mcpkit.NewTool[taskIDArgs, taskAnswer](mcpkit.Spec{
	Name: action.NativeGetTask,
	Description: "Reads a task that a call in this session started, such as a callable agent's run. Pass task_id. " +
		"Answers with its status (working, completed, failed or cancelled), poll_interval_ms while it is working, " +
		"the result of a completed task, and the error of a failed one.",
})

var cancelTaskTool = mcpkit.NewTool[taskIDArgs, cancelAnswer](mcpkit.Spec{
	Name: action.NativeCancelTask,
	Description: "Cancels a task that a call in this session started: a queued task at once; a running agent stops at its next step " +
		"and its writes roll back. Pass task_id. Answers with task_id and a hint, also for a task that has already finished.",
})

// toolErrorKey is where a tool error's code, message and hint go in _meta.
const toolErrorKey = "com.twisp/error"

func (e *callEnv) nativeGetTask(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(getTaskTool, input)
	if failure != nil {
		return nil, failure
	}
	tasks := e.request.call.tasks(e.request.runner)
	if tasks == nil {
		return nil, taskNotFound()
	}
	task, err := tasks.Get(ctx, e.request.call.Scope(), args.TaskID)
	if err != nil {
		return nil, taskFailure(err)
	}
	answer := answerOf(task)
	if task.Status == store.Succeeded {
		// The read that returns the agent's output is a use of it.
		e.request.used = append(e.request.used, task.ID)
	}
	return asObject(answer)
}

// answerOf is get_task's answer for a task.
func answerOf(task Task) taskAnswer {
	answer := taskAnswer{TaskID: task.ID, Status: string(task.WireStatus())}
	switch {
	case !task.Finished():
		answer.PollIntervalMs = TaskPollInterval.Milliseconds()
	case task.Status == store.Succeeded:
		result := &taskResult{}
		if _, isObject := task.Output.(map[string]any); isObject {
			result.StructuredContent = task.Output
		} else {
			result.Content = []textContent{{Type: "text", Text: outputText(task.Output)}}
		}
		answer.Result = result
	case task.Status == store.Failed:
		f := task.ToolFailure()
		text := f.Message
		if f.Hint != "" {
			text += "\nHint: " + f.Hint
		}
		answer.Result = &taskResult{IsError: true, Content: []textContent{{Type: "text", Text: text}},
			Meta: map[string]any{toolErrorKey: map[string]any{"code": f.Code, "message": f.Message, "hint": f.Hint}}}
	case task.Status == store.Exhausted:
		wire := task.Error()
		data, _ := wire.Data.(map[string]any)
		code, _ := data["code"].(string)
		hint, _ := data["hint"].(string)
		answer.Error = &taskError{Code: wire.Code, Message: wire.Message, Data: taskErrorData{Code: code, Hint: hint}}
	}
	return answer
}

func outputText(output any) string {
	if s, ok := output.(string); ok {
		return s
	}
	b, _ := json.Marshal(output)
	return string(b)
}

func (e *callEnv) nativeCancelTask(ctx context.Context, input map[string]any) (any, *Failure) {
	args, failure := decode(cancelTaskTool, input)
	if failure != nil {
		return nil, failure
	}
	tasks := e.request.call.tasks(e.request.runner)
	if tasks == nil {
		return nil, taskNotFound()
	}
	c := e.request.call
	task, err := tasks.Cancel(ctx, c.Scope(), args.TaskID, CancelledBy{Principal: c.Who.Principal, Subject: c.Who.Subject, ExecutionID: c.ParentID})
	if err != nil {
		return nil, taskFailure(err)
	}
	return asObject(cancelAnswer{TaskID: task.ID, Hint: CancelHint(task)})
}

// CancelHint says what a cancellation did.
func CancelHint(task Task) string {
	switch {
	case task.Status == store.Cancelled:
		return "The task is cancelled. Read it with get_task to confirm."
	case task.Finished():
		return "The task had already finished, so cancelling it changed nothing. Read its result with get_task."
	}
	return "The task's agent stops at its next step and its writes roll back. Read it with get_task until it is cancelled."
}

func taskNotFound() *Failure {
	return NewFailure(CodeTaskNotFound, ErrTaskNotFound.Message, ErrTaskNotFound.Hint)
}

func taskFailure(err error) *Failure {
	if errors.Is(err, ErrTaskNotFound) {
		return taskNotFound()
	}
	return NewFailure(CodeFailure, "The task could not be read.", "Call again in a moment.").WithDetail(err.Error())
}

// asObject turns an answer into the JSON object the endpoint sends as
// structuredContent.
func asObject(v any) (any, *Failure) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, NewFailure(CodeFailure, "The answer could not be encoded.", "Call again.").WithDetail(err.Error())
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, NewFailure(CodeFailure, "The answer could not be encoded.", "Call again.").WithDetail(err.Error())
	}
	return out, nil
}
