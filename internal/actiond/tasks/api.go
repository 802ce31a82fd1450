package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// The Service is the engine's Tasks: starting, reading and cancelling
// tasks within a request's scope.
var _ engine.Tasks = (*Service)(nil)

// Start records a task and queues it; local workers are woken at once,
// other processes' find it at their next poll.
func (s *Service) Start(ctx context.Context, start engine.TaskStart) (engine.Task, error) {
	spec := agent.SpecOf(start)
	specJSON, err := json.Marshal(spec)
	if err != nil {
		return engine.Task{}, fmt.Errorf("tasks: encode the task's start: %w", err)
	}
	input, err := json.Marshal(start.Input)
	if err != nil {
		return engine.Task{}, fmt.Errorf("tasks: encode the task's input: %w", err)
	}
	who := start.Who
	def := start.Agent.Definition
	e := &store.Execution{
		ID: s.opts.IDs.New(), Account: start.Scope.Account, ActionID: start.Agent.ID, ActionVersion: int64(start.Agent.Version),
		ActionName: def.Name, EventType: "task.start", Role: store.RoleTask, StartedBy: start.StartedBy,
		Caller: who.Principal, Subject: who.Subject, Client: who.Client, Input: input, Preview: start.Preview,
	}
	t := &store.Task{
		ExecutionID: e.ID, Account: start.Scope.Account, ServerID: start.Scope.ServerID, SessionID: start.Scope.SessionID,
		Principal: start.Scope.Principal, Subject: start.Scope.Subject, Spec: specJSON, MaxAttempts: 1 + def.Retries(),
	}
	err = s.opts.Store.Write(ctx, func(tx *store.Tx) error { return tx.StartTask(ctx, e, t, s.opts.Limits) })
	if errors.Is(err, store.ErrTaskLimit) {
		return engine.Task{}, fmt.Errorf("%w: %w", engine.ErrStartLimit, err)
	}
	if err != nil {
		return engine.Task{}, err
	}
	s.notify()
	return engine.Task{ID: e.ID, Status: store.Queued, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Preview: start.Preview}, nil
}

// Get reads a task within scope.
func (s *Service) Get(ctx context.Context, scope engine.TaskScope, id string) (engine.Task, error) {
	var task engine.Task
	err := s.opts.Store.Read(ctx, func(tx *store.Tx) error {
		t, e, err := reach(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		task = view(t, e)
		return nil
	})
	return task, err
}

// Cancel cancels a task within scope: a queued one at once, a running one
// at its next step (at once when this process runs it).
func (s *Service) Cancel(ctx context.Context, scope engine.TaskScope, id string, by engine.CancelledBy) (engine.Task, error) {
	byJSON, err := json.Marshal(by)
	if err != nil {
		return engine.Task{}, err
	}
	var task engine.Task
	err = s.opts.Store.Write(ctx, func(tx *store.Tx) error {
		if _, _, err := reach(ctx, tx, scope, id); err != nil {
			return err
		}
		if _, err := tx.CancelTask(ctx, scope.Account, id, byJSON); err != nil {
			return err
		}
		t, e, err := reach(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		task = view(t, e)
		return nil
	})
	if err != nil {
		return engine.Task{}, err
	}
	if task.Status == store.Running {
		s.interrupt(id, errCancelled)
	}
	return task, nil
}

// reach reads a task the scope may reach: of the same server, session,
// principal and subject. Any other task is ErrTaskNotFound, as an unknown
// one is.
func reach(ctx context.Context, tx *store.Tx, scope engine.TaskScope, id string) (*store.Task, *store.Execution, error) {
	t, err := tx.TaskByID(ctx, scope.Account, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, engine.ErrTaskNotFound
	}
	if err != nil {
		return nil, nil, err
	}
	if t.ServerID != scope.ServerID || t.SessionID != scope.SessionID || t.Principal != scope.Principal || t.Subject != scope.Subject {
		return nil, nil, engine.ErrTaskNotFound
	}
	e, err := tx.Execution(ctx, scope.Account, id)
	if err != nil {
		return nil, nil, err
	}
	return t, e, nil
}

// view is a task as its reader sees it.
func view(t *store.Task, e *store.Execution) engine.Task {
	task := engine.Task{ID: t.ExecutionID, Status: e.Status, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Preview: e.Preview}
	switch e.Status {
	case store.Succeeded:
		json.Unmarshal(e.Output, &task.Output)
	case store.Failed, store.Exhausted:
		var recorded struct {
			Code string `json:"code"`
			Hint string `json:"hint"`
		}
		json.Unmarshal(e.Error, &recorded)
		task.Failure = engine.NewFailure(recorded.Code, "", safeHint(recorded.Hint, t))
	}
	return task
}

// What a task's hint may not name: an action ID (any UUID), a policy's
// index, or the principal itself. The execution keeps the full hint.
var (
	uuidPattern   = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	policyPattern = regexp.MustCompile(`(?i)polic(y|ies)\s*\[?\s*#?\d+`)
)

// GenericHint replaces a task's hint that would name more than a denying
// layer.
const GenericHint = "The task's agent failed. The server's owner can read why on the task's execution."

func safeHint(hint string, t *store.Task) string {
	if hint == "" {
		return ""
	}
	if uuidPattern.MatchString(hint) || policyPattern.MatchString(hint) || namesWord(hint, t.Principal) {
		return GenericHint
	}
	return hint
}

// namesWord says whether text holds word with no letter or digit on either
// side of it.
func namesWord(text, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isWordByte(text[start-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_'
}
