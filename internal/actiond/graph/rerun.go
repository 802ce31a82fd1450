package graph

import (
	"context"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// RerunExecution starts a task's agent again, as a new start by the caller
// (ACT-558, ACT-479, ACT-563..565).
func (m *actionsMutation) RerunExecution(executionID string) (model.Execution, error) {
	ctx := m.ctx
	st := current(ctx)
	if !st.env.RecordWrites {
		return nil, newError(CodeBadRequest, "rerunExecution", "rerunExecution starts a task, which this caller cannot: rerun through the GraphQL API", nil)
	}
	if st.env.Replayer == nil {
		return nil, newError(CodeInternal, "rerunExecution", "this actiond serves no MCP endpoint to start tasks with", nil)
	}
	original, err := rerunnable(ctx, executionID)
	if err != nil {
		return nil, err
	}
	access := st.env.Access
	if access.Root {
		return nil, newError(CodeBadRequest, "executionId", "the local root has no principal to run an agent as: rerun with a principal's token", nil)
	}
	agent, err := registry.Action(ctx, st.env.Work, original.ActionID, int(original.ActionVersion))
	if err != nil {
		return nil, newError(CodeNotFound, "executionId", "the task's agent version is gone, so it cannot be rerun", err)
	}
	subject, _ := access.Claims["sub"].(string)
	client, _ := access.Claims["client_id"].(string)
	id, err := st.env.Replayer.Rerun(ctx, RerunRequest{
		Account: st.env.Account, Original: original, Agent: agent.Target(),
		Principal: access.Principal, Subject: subject, Client: client, Claims: access.Claims, Layers: access.Layers,
	})
	if err != nil {
		return nil, endpointError(err)
	}
	var started *store.Execution
	err = st.env.Store.Read(ctx, func(tx *store.Tx) error {
		started, err = tx.Execution(ctx, st.env.Account, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &executionRecord{rec: started}, nil
}

// rerunnable reads the task to rerun: only a task its request did start,
// which the reader may read, never a request, a draft's preview or a task a
// replay recorded as not started.
func rerunnable(ctx context.Context, id string) (*store.Execution, error) {
	original, found, err := readableExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, noReadableExecution(id)
	}
	switch {
	case len(original.Draft) > 0:
		return nil, draftPreview("rerun")
	case original.Role == store.RoleRequest || original.Role == store.RoleRefusal:
		return nil, badRequest("executionId", "a request runs only when its endpoint serves it, so it is never rerun: replay it with replayExecution")
	case original.Role != store.RoleTask:
		return nil, badRequest("executionId", "rerunExecution reruns a task; this execution is a %s", original.Role)
	case store.NotStarted(original):
		return nil, badRequest("executionId", "this task was recorded as not started by a replay and never ran, so it cannot be rerun: rerun a task its request did start")
	}
	return original, nil
}

// endpointError is a failure the endpoint reported while it replayed or
// reran executionId: a coded one keeps its code and hint, on that field.
func endpointError(err error) error {
	code := coded.CodeOf(err)
	if code == "" {
		return err
	}
	out := newError(code, "executionId", err.Error(), err)
	out.Hint = coded.HintOf(err)
	return out
}
