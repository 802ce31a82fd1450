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

// addTaskMethods answers the Tasks extension's methods with mcpkit's wire
// types. Each is a request of its own: admitted into its session, counted
// against its rate limit, and recorded (the gate refuses them from a client
// without the extension before that). A task is reached only from the
// session that started it, by the same principal and subject: any other
// task id is mcp_task_not_found, the same answer whatever it names.
func (h *Handler) addTaskMethods(sdk *mcp.Server) {
	must(mcp.AddReceivingCustomMethod(sdk, mcpkit.MethodGetTask, func(ctx context.Context, _ *mcp.ServerSession, p *mcpkit.TaskParams) (*mcpkit.GetTaskResult, error) {
		ex := exchangeFrom(ctx)
		if ex == nil || p == nil {
			return nil, h.taskNotFound(ex)
		}
		return h.getTask(ex, p.TaskID)
	}))
	must(mcp.AddReceivingCustomMethod(sdk, mcpkit.MethodUpdateTask, func(ctx context.Context, _ *mcp.ServerSession, p *mcpkit.UpdateTaskParams) (*mcpkit.AckResult, error) {
		ex := exchangeFrom(ctx)
		if ex == nil || p == nil {
			return nil, h.taskNotFound(ex)
		}
		return h.updateTask(ex, p.TaskID)
	}))
	must(mcp.AddReceivingCustomMethod(sdk, mcpkit.MethodCancelTask, func(ctx context.Context, _ *mcp.ServerSession, p *mcpkit.TaskParams) (*mcpkit.AckResult, error) {
		ex := exchangeFrom(ctx)
		if ex == nil || p == nil {
			return nil, h.taskNotFound(ex)
		}
		return h.cancelTask(ex, p.TaskID)
	}))
}

func (ex *exchange) taskScope() engine.TaskScope {
	return engine.TaskScope{Account: ex.account, ServerID: ex.server.ActionID, SessionID: ex.session.ID, Principal: ex.who.Principal, Subject: ex.who.Subject}
}

// tasksOf is where the request's task reads and cancels go: a replay's
// cancel nothing.
func (h *Handler) tasksOf(ex *exchange) engine.Tasks {
	if ex.replayTasks != nil {
		return ex.replayTasks
	}
	return h.opts.Tasks
}

func (h *Handler) taskNotFound(ex *exchange) error {
	rerr := newError(codeInvalidParams, errTaskNotFound, http.StatusBadRequest, nil)
	if ex != nil {
		ex.fail(rerr)
	}
	return rerr.jsonrpc()
}

// reachTask reads a task the request may reach.
func (h *Handler) reachTask(ex *exchange, id string) (engine.Task, error) {
	tasks := h.tasksOf(ex)
	if tasks == nil {
		return engine.Task{}, h.taskNotFound(ex)
	}
	task, err := tasks.Get(ex.ctx, ex.taskScope(), id)
	return task, h.taskError(ex, err)
}

func (h *Handler) taskError(ex *exchange, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrTaskNotFound):
		return h.taskNotFound(ex)
	}
	h.opts.Logger.Error("read task", "execution", ex.executionID, "err", err)
	rerr := newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
	rerr.Detail = err.Error()
	ex.fail(rerr)
	return rerr.jsonrpc()
}

// getTask answers tasks/get: the task, with a completed one's result (the
// agent's output rendered as a tools/call result, or a tool error for a
// FAILED one) and a failed one's error. The poll that returns an agent's
// output records it as a TOOL use; every poll records the status it
// returned.
func (h *Handler) getTask(ex *exchange, id string) (*mcpkit.GetTaskResult, error) {
	task, err := h.reachTask(ex, id)
	if err != nil {
		return nil, err
	}
	res := mcpkit.NewGetTaskResult(task.Wire())
	switch task.Status {
	case store.Succeeded:
		res.Result, err = json.Marshal(toolResult(task.Output))
		ex.addUse(store.Use{Kind: store.UseTool, Ref: task.ID})
	case store.Failed:
		res.Result, err = json.Marshal(failureResult(task.ToolFailure()))
	case store.Exhausted:
		res.Error = task.Error()
	}
	if err != nil {
		return nil, h.taskError(ex, err)
	}
	ex.setInvocation("output", map[string]any{"status": task.WireStatus(), "executionStatus": task.Status, "taskId": task.ID})
	return res, nil
}

// cancelTask answers tasks/cancel: acknowledged for any reachable task,
// also one that finished; the execution's cancelledBy names the principal
// and this request. A cancellation is not a business write, so it takes
// effect on a server in preview mode too.
func (h *Handler) cancelTask(ex *exchange, id string) (*mcpkit.AckResult, error) {
	tasks := h.tasksOf(ex)
	if tasks == nil {
		return nil, h.taskNotFound(ex)
	}
	task, err := tasks.Cancel(ex.ctx, ex.taskScope(), id,
		engine.CancelledBy{Principal: ex.who.Principal, Subject: ex.who.Subject, ExecutionID: ex.executionID})
	if err := h.taskError(ex, err); err != nil {
		return nil, err
	}
	ex.setInvocation("output", map[string]any{"status": task.WireStatus(), "executionStatus": task.Status, "taskId": task.ID})
	return mcpkit.NewAck(), nil
}

// must stops at a method the SDK refuses to add: only a name that shadows a
// standard method is refused, and these names are fixed, so that is a
// programming error every test that starts a server finds.
func must(err error) {
	if err != nil {
		panic("gateway: " + err.Error())
	}
}

// updateTask acknowledges tasks/update of a task the client may reach. The
// platform never asks a client for input, so there is nothing to update.
func (h *Handler) updateTask(ex *exchange, taskID string) (*mcpkit.AckResult, error) {
	if _, err := h.reachTask(ex, taskID); err != nil {
		return nil, err
	}
	ex.setInvocation("output", map[string]any{"updated": false})
	return mcpkit.NewAck(), nil
}
