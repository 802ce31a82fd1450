package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// Replayer reruns a recorded MCP request (the MCP endpoint, wired by the
// server): the API decides what may be replayed against what, the endpoint
// runs it as it would serve it.
type Replayer interface {
	Replay(ctx context.Context, r ReplayRequest) (*ReplayResult, error)
	// Rerun starts a task's agent again, and returns the new task's ID.
	Rerun(ctx context.Context, r RerunRequest) (string, error)
}

// RerunRequest is one task to start again: Original is the task's
// execution, Agent the agent at the version it ran; who reruns as in a
// ReplayRequest.
type RerunRequest struct {
	Account                    string
	Original                   *store.Execution
	Agent                      action.Target
	Principal, Subject, Client string
	Claims                     map[string]any
	Layers                     []policy.Layer
}

// ReplayRequest is one replay to run.
type ReplayRequest struct {
	Account  string
	Original *store.Execution
	// Calls are the calls recorded beneath the original request.
	Calls  []*store.Execution
	Server action.Target
	Draft  bool
	// Who replays: the local root, or a principal under its layers.
	Root                       bool
	Principal, Subject, Client string
	Claims                     map[string]any
	Layers                     []policy.Layer
}

// ReplayResult is the replay's record and the calls beneath it; the API
// commits them with the operation.
type ReplayResult struct {
	Execution *store.Execution
	Calls     []*store.Execution
}

// ReplayExecution reruns a request against a version or a draft of its
// server, and records the replay beside it.
func (m *actionsMutation) ReplayExecution(executionID string, version *int, draft map[string]any, replayModel *model.ReplayModel) (*model.ExecutionReplay, error) {
	ctx := m.ctx
	st := current(ctx)
	if replayModel != nil && *replayModel == model.ReplayModelRecorded {
		return nil, badRequest("model", "a request's replay involves no model, so there are no recorded answers to use: leave model out or pass LIVE")
	}
	if !st.env.RecordWrites {
		return nil, newError(CodeBadRequest, "replayExecution", "replayExecution records the replay, which this caller cannot commit: replay through the GraphQL API", nil)
	}
	if st.env.Replayer == nil {
		return nil, newError(CodeInternal, "replayExecution", "this actiond serves no MCP endpoint to replay requests with", nil)
	}
	if version != nil && draft != nil {
		return nil, badRequest("draft", "pass a version or a draft, not both")
	}
	original, calls, err := replayable(ctx, executionID)
	if err != nil {
		return nil, err
	}
	target, isDraft, err := replayTarget(ctx, original.ActionID, version, draft)
	if err != nil {
		return nil, err
	}
	access := st.env.Access
	subject, _ := access.Claims["sub"].(string)
	client, _ := access.Claims["client_id"].(string)
	result, err := st.env.Replayer.Replay(ctx, ReplayRequest{
		Account: st.env.Account, Original: original, Calls: calls, Server: target, Draft: isDraft,
		Root: access.Root, Principal: replayerName(access), Subject: subject, Client: client, Claims: access.Claims, Layers: access.Layers,
	})
	if err != nil {
		return nil, endpointError(err)
	}
	st.addRecord(func(ctx context.Context, tx *store.Tx) error {
		if err := tx.InsertExecution(ctx, result.Execution); err != nil {
			return err
		}
		for _, call := range result.Calls {
			if err := tx.InsertExecution(ctx, call); err != nil {
				return err
			}
		}
		return nil
	})
	replay := &model.ExecutionReplay{
		Original:        &executionRecord{rec: original},
		Replay:          &executionRecord{rec: result.Execution, children: result.Calls, loaded: true},
		OutputChanged:   !sameAnswer(original.Output, result.Execution.Output),
		WriteSetChanged: !sameWrites(topLevel(calls, original.ID), topLevel(result.Calls, result.Execution.ID)),
	}
	if !isDraft {
		v := target.Version
		replay.ServerVersion = &v
	}
	return replay, nil
}

func replayerName(access Access) string {
	if access.Root {
		return "root"
	}
	return access.Principal
}

// replayable reads the request to replay and its calls: only a finished
// request, which the reader may read, can be replayed.
func replayable(ctx context.Context, id string) (*store.Execution, []*store.Execution, error) {
	original, found, err := readableExecution(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !found {
		return nil, nil, noReadableExecution(id)
	}
	switch {
	case len(original.Draft) > 0:
		return nil, nil, draftPreview("replayed")
	case original.Role == store.RoleRefusal:
		return nil, nil, badRequest("executionId", "this request was refused and ran nothing, so it cannot be replayed")
	case original.Role != store.RoleRequest:
		return nil, nil, badRequest("executionId", "replayExecution reruns an MCP request; this execution is a %s", original.Role)
	case original.Status == store.Running:
		return nil, nil, badRequest("executionId", "this request is still running: replay it once it has ended")
	}
	st := current(ctx)
	var calls []*store.Execution
	previewed := false
	err = st.env.Store.Read(ctx, func(tx *store.Tx) error {
		calls, err = tx.Executions(ctx, store.ExecutionFilter{Account: st.env.Account, ParentID: original.ID})
		if err != nil {
			return err
		}
		previewed, err = ranDraft(ctx, tx, st.env.Account, original.ID, calls)
		return err
	})
	if err == nil && previewed {
		return nil, nil, draftPreview("replayed")
	}
	return original, calls, err
}

// draftPreview refuses a draft's preview: it is never rerun or replayed
// (ACT-479, ACT-480).
func draftPreview(what string) error {
	err := badRequest("executionId", "this is a draft's preview, which is never %s: preview the draft again with invoke", what)
	err.Hint = "Call invoke with the draft again; replay or rerun only what stored versions ran."
	return err
}

// ranDraft says whether a request previewed a draft: an execution beneath
// it, or a task it started, ran an unpublished definition. Only invoke
// runs a draft, directly or beneath a program, so a request that called
// neither costs no reads.
func ranDraft(ctx context.Context, tx *store.Tx, account, id string, calls []*store.Execution) (bool, error) {
	if !slices.ContainsFunc(calls, invokes) {
		return false, nil
	}
	started, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, StartedBy: id})
	if err != nil {
		return false, err
	}
	pending := append(append([]*store.Execution{}, calls...), started...)
	for len(pending) > 0 {
		e := pending[0]
		pending = pending[1:]
		if len(e.Draft) > 0 {
			return true, nil
		}
		if !invokes(e) {
			continue // only invoke runs a draft, beneath it or as a task
		}
		beneath, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, ParentID: e.ID})
		if err != nil {
			return false, err
		}
		pending = append(pending, beneath...)
	}
	return false, nil
}

// replayTarget is the server to replay against: a version, the latest, or a
// draft merged over the latest as updateAction merges, validated as a write
// of it would be. The replayer needs to read the server.
func replayTarget(ctx context.Context, serverID string, version *int, draft map[string]any) (action.Target, bool, error) {
	st := current(ctx)
	n := 0
	if version != nil {
		if *version < 1 {
			return action.Target{}, false, badRequest("version", "a version is a number from 1")
		}
		n = *version
	}
	stored, err := registry.Action(ctx, st.env.Work, serverID, n)
	if errors.Is(err, registry.ErrNotFound) {
		return action.Target{}, false, newError(CodeNotFound, "version", "the request's server has no such version", err)
	}
	if err != nil {
		return action.Target{}, false, err
	}
	if err := st.env.Access.check(ctx, policy.Select, registry.ResourceAction, stored.Document()); err != nil {
		return action.Target{}, false, err
	}
	target := action.Target{ID: stored.ID, Version: stored.Version, Definition: stored.Definition, Enabled: stored.Definition.IsEnabled() && !stored.Deleted, Deleted: stored.Deleted}
	if draft == nil {
		return target, false, nil
	}
	raw, err := definitionInput(draft)
	if err != nil {
		return action.Target{}, false, err
	}
	// One operation replaying many requests against one draft validates
	// it once.
	key := serverID + "@" + strconv.Itoa(stored.Version) + ":" + string(raw)
	st.mu.Lock()
	validated, ok := st.drafts[key]
	st.mu.Unlock()
	if ok {
		return validated, true, nil
	}
	def, err := action.Update(stored.Definition, raw)
	if err != nil {
		return action.Target{}, false, err
	}
	if def.Kind != action.KindMCP {
		return action.Target{}, false, badRequest("draft.kind", "a replay's draft is of the request's server, kind mcp")
	}
	if err := action.Validate(ctx, def, registry.NewResolver(st.env.Work), st.env.Access); err != nil {
		return action.Target{}, false, err
	}
	target.Definition = def
	st.mu.Lock()
	if st.drafts == nil {
		st.drafts = map[string]action.Target{}
	}
	st.drafts[key] = target
	st.mu.Unlock()
	return target, true, nil
}

// invokes says whether a call is invoke's or program's, beneath which a
// draft may have run.
func invokes(e *store.Execution) bool {
	return e.ActionID == "native:"+action.NativeInvoke || e.ActionID == "native:"+action.NativeProgram
}

func topLevel(calls []*store.Execution, parent string) []*store.Execution {
	var out []*store.Execution
	for _, c := range calls {
		if c.ParentID == parent {
			out = append(out, c)
		}
	}
	return out
}

// sameAnswer compares two answers without their _meta, which names the
// answering server version.
func sameAnswer(a, b json.RawMessage) bool {
	return bytes.Equal(withoutMeta(a), withoutMeta(b))
}

func withoutMeta(raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	if m, ok := v.(map[string]any); ok {
		delete(m, "_meta")
		if e, ok := m["error"].(map[string]any); ok {
			delete(e, "_meta")
		}
	}
	out, _ := json.Marshal(v)
	return out
}

func sameWrites(a, b []*store.Execution) bool {
	flat := func(calls []*store.Execution) []byte {
		var writes []store.Write
		for _, c := range calls {
			writes = append(writes, c.WriteSet...)
		}
		out, _ := json.Marshal(writes)
		return withoutMeta(out)
	}
	return bytes.Equal(flat(a), flat(b))
}
