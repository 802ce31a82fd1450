package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// The Tasks extension's methods. Each is a request of its own: admitted
// into its session, counted against its rate limit, and recorded (the gate
// refuses them from a client without the extension before that). A task
// is reached only from the session that started it, by the same principal
// and subject: any other task id is mcp_task_not_found, the same answer
// whatever it names.

func (ex *exchange) taskScope() engine.TaskScope {
	return engine.TaskScope{Account: ex.account, ServerID: ex.server.ActionID, SessionID: ex.session.ID, Principal: ex.who.Principal, Subject: ex.who.Subject}
}

// tasksOf is where the request's task reads and cancels go: a replay's
// cancel nothing.
func (h *Handler) tasksOf(ex *exchange) engine.Tasks {
	if ex.tasks != nil {
		return ex.tasks
	}
	return h.opts.Tasks
}

func taskNotFound(rec *record) *rpcError {
	return rec.fail(newError(codeInvalidParams, errTaskNotFound, http.StatusBadRequest, nil))
}

// reachTask reads a task the request may reach.
func (h *Handler) reachTask(ctx context.Context, ex *exchange, rec *record) (engine.Task, *rpcError) {
	tasks := h.tasksOf(ex)
	if tasks == nil {
		return engine.Task{}, taskNotFound(rec)
	}
	task, err := tasks.Get(ctx, ex.taskScope(), ex.req.param("taskId"))
	return task, h.taskError(ex, rec, err)
}

func (h *Handler) taskError(ex *exchange, rec *record, err error) *rpcError {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrTaskNotFound):
		return taskNotFound(rec)
	}
	h.opts.Logger.Error("read task", "execution", ex.executionID, "err", err)
	rerr := newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
	rerr.Detail = err.Error()
	return rec.fail(rerr)
}

// taskOutput is what a task request's invocation keeps: the status it
// answered.
type taskOutput struct {
	ExecutionStatus string            `json:"executionStatus"`
	Status          mcpkit.TaskStatus `json:"status"`
	TaskID          string            `json:"taskId"`
}

// getTask answers tasks/get: the task, with a completed one's result (the
// agent's output rendered as a tools/call result, or a tool error for a
// FAILED one) and a failed one's error. The poll that returns an agent's
// output records it as a TOOL use; every poll records the status it
// returned.
func (h *Handler) getTask(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	task, rerr := h.reachTask(ctx, ex, rec)
	if rerr != nil {
		return nil, rerr
	}
	res := mcpkit.NewGetTaskResult(task.Wire())
	var err error
	switch task.Status {
	case store.Succeeded:
		res.Result, err = json.Marshal(toolResult(task.Output))
		rec.addUse(store.Use{Kind: store.UseTool, Ref: task.ID})
	case store.Failed:
		res.Result, err = json.Marshal(failureResult(task.ToolFailure()))
	case store.Exhausted:
		res.Error = task.Error()
	}
	if err != nil {
		return nil, h.taskError(ex, rec, err)
	}
	rec.invocation.Output = taskOutput{Status: task.WireStatus(), ExecutionStatus: task.Status, TaskID: task.ID}
	return res, nil
}

// cancelTask answers tasks/cancel: acknowledged for any reachable task,
// also one that finished; the execution's cancelledBy names the principal
// and this request. A cancellation is not a business write, so it takes
// effect on a server in preview mode too.
func (h *Handler) cancelTask(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	tasks := h.tasksOf(ex)
	if tasks == nil {
		return nil, taskNotFound(rec)
	}
	task, err := tasks.Cancel(ctx, ex.taskScope(), ex.req.param("taskId"),
		engine.CancelledBy{Principal: ex.who.Principal, Subject: ex.who.Subject, ExecutionID: ex.executionID})
	if rerr := h.taskError(ex, rec, err); rerr != nil {
		return nil, rerr
	}
	rec.invocation.Output = taskOutput{Status: task.WireStatus(), ExecutionStatus: task.Status, TaskID: task.ID}
	return mcpkit.NewAck(), nil
}

// updateTask acknowledges tasks/update of a task the client may reach. The
// platform never asks a client for input, so there is nothing to update.
func (h *Handler) updateTask(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError) {
	if _, rerr := h.reachTask(ctx, ex, rec); rerr != nil {
		return nil, rerr
	}
	rec.invocation.Output = map[string]any{"updated": false}
	return mcpkit.NewAck(), nil
}
