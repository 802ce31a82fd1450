package gateway

import (
	"context"
	"encoding/json"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Rerun is one task to start again by another principal, or the same one:
// the API has decided it may be rerun (a task its request did start).
type Rerun struct {
	Account string
	// Original is the task's execution; Agent its agent at the version it
	// ran.
	Original *store.Execution
	Agent    action.Target
	Rerunner ReplayPrincipal
}

// Rerun starts the task's agent again with its recorded input, as a new
// start by the rerunner in the task's server and session, in preview when
// the task was a preview (ACT-564, ACT-565). Its startedBy names the task
// it reruns. It returns the new task's ID.
func (h *Handler) Rerun(ctx context.Context, r Rerun) (string, error) {
	d, ok := h.opts.Directory.(*directory)
	if !ok {
		return "", coded.New(CodeReplayUnsupported, "a rerun needs the registry's directory")
	}
	var task *store.Task
	err := h.opts.Store.Read(ctx, func(tx *store.Tx) (err error) {
		task, err = tx.TaskByID(ctx, r.Account, r.Original.ID)
		return err
	})
	if err != nil {
		return "", coded.Wrap(engine.CodeTaskNotFound, err, "the task's record is gone, so it cannot be rerun")
	}
	var spec struct {
		Server engine.ServerRef `json:"server"`
	}
	if err := json.Unmarshal(task.Spec, &spec); err != nil {
		return "", coded.Wrap(CodeReplayUnsupported, err, "the task's start does not say which server it ran for")
	}
	server, err := d.registry.Resolver(r.Account).Resolve(ctx, spec.Server.Name, 0)
	if err != nil {
		return "", coded.Wrap(CodeReplayUnsupported, err, "the task's server %q is gone, so its agent cannot run again", spec.Server.Name)
	}
	layers := make([]policy.Layer, 0, len(r.Rerunner.Layers))
	for _, layer := range r.Rerunner.Layers {
		if layer.Claims == nil {
			layer.Claims = r.Rerunner.Claims
		}
		layers = append(layers, layer)
	}
	check := policy.Request{Operation: policy.Invoke, Resource: action.ResourceAction, Document: action.Document(server), Claims: r.Rerunner.Claims}
	if err := policy.Check(ctx, check, layers...); err != nil || len(layers) == 0 {
		return "", coded.Wrap(CodeReplayDenied, err, "you may not invoke the task's MCP server").WithHint("Ask an administrator for INVOKE on the server's action.")
	}
	var input map[string]any
	if err := json.Unmarshal(r.Original.Input, &input); err != nil {
		return "", coded.Wrap(CodeReplayUnsupported, err, "the task's recorded input is not an object")
	}
	compiled, err := d.compiled.Get(r.Agent.ID, r.Agent.Version, r.Agent.Definition)
	if err != nil {
		return "", coded.Wrap(CodeReplayUnsupported, err, "the task's agent does not compile")
	}
	who := &auth.Identity{Principal: r.Rerunner.Principal, Subject: r.Rerunner.Subject, Client: r.Rerunner.Client, Claims: r.Rerunner.Claims, ExpiresAt: expiry(r.Rerunner.Claims)}
	started, failure := h.opts.Runner.StartTask(ctx, &engine.Call{
		Account: r.Account, Who: who, Layers: layers, Target: r.Agent, Compiled: compiled, Input: input,
		ParentID: r.Original.ID, Preview: r.Original.Preview, Server: spec.Server, SessionID: task.SessionID,
	})
	if failure != nil {
		return "", coded.New(failure.Code, "%s", failure.Message).WithHint(failure.Hint)
	}
	return started.ID, nil
}

// expiry is when the rerunner's token expires, which the task's worker
// checks before every step; none when its claims say nothing.
func expiry(claims map[string]any) time.Time {
	switch exp := claims["exp"].(type) {
	case float64:
		return time.Unix(int64(exp), 0)
	case int64:
		return time.Unix(exp, 0)
	case json.Number:
		if n, err := exp.Int64(); err == nil {
			return time.Unix(n, 0)
		}
	}
	return time.Time{}
}
