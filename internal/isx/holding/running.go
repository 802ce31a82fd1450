package holding

import (
	"context"
	"slices"

	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
)

// max-concurrent-tasks counts the running background tasks of the host
// user across sessions from each instance's running stamp (the task ids
// believed running), kept beside the task records themselves; the
// idempotency keys of an instance's tasks are stamped on it too, so that a
// repeat after a crash finds the instance its key made a task in.

// ReserveTask counts the running background tasks of this host user
// across sessions, from the running stamps of views, against limit. Only
// when the stamps say the limit is reached are they checked against the
// instances (one exec per instance with tasks). The release ends the
// reservation once the task is stamped running, or was not started.
func (h *Holder) ReserveTask(ctx context.Context, views []View, limit int) (func(), error) {
	h.taskMu.Lock()
	defer h.taskMu.Unlock()
	count := func(views []View) int {
		n := h.pendingTasks
		for _, v := range views {
			n += len(v.Running)
		}
		return n
	}
	if count(views) >= limit {
		refreshed, err := h.refreshRunning(ctx, views)
		if err != nil {
			return nil, err
		}
		if n := count(refreshed); n >= limit {
			return nil, refuse(CodeLimit, "", "host user %s already has %d running background tasks and mcp.yaml allows %d (max-concurrent-tasks, counted across sessions); wait for one (wait_any) or cancel_task one, or ask the user to raise the limit",
				h.Owner, n, limit)
		}
	}
	h.pendingTasks++
	return func() {
		h.taskMu.Lock()
		h.pendingTasks--
		h.taskMu.Unlock()
	}, nil
}

// refreshRunning rewrites each instance's running stamp from what its
// tasks say now.
func (h *Holder) refreshRunning(ctx context.Context, views []View) ([]View, error) {
	out := make([]View, 0, len(views))
	for _, v := range views {
		if len(v.Running) == 0 {
			out = append(out, v)
			continue
		}
		still := map[string]bool{}
		if v.Inst.Running() {
			infos, err := task.List(ctx, h.Client, v.Inst.Name)
			if err != nil {
				return nil, err
			}
			for _, info := range infos {
				if info.State == task.StateRunning {
					still[info.ID] = true
				}
			}
		}
		updated, err := h.Update(ctx, v.Inst.Name, func(v View) (map[string]string, error) {
			var gone []string
			for _, id := range v.Running {
				if !still[id] {
					gone = append(gone, id)
				}
			}
			if len(gone) == 0 {
				return nil, nil
			}
			return map[string]string{instance.KeyMCPRunning: withoutWords(v.Stamps.MCP.Running, gone...)}, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, updated)
	}
	return out, nil
}

// MarkRunning adds a task to its instance's running stamp.
func (h *Holder) MarkRunning(ctx context.Context, name, taskID string) error {
	_, err := h.Update(ctx, name, func(v View) (map[string]string, error) {
		return map[string]string{instance.KeyMCPRunning: withWord(v.Stamps.MCP.Running, taskID)}, nil
	})
	return err
}

// NoLongerRunning drops a task from its instance's running stamp.
func (h *Holder) NoLongerRunning(ctx context.Context, name, taskID string) error {
	_, err := h.Update(ctx, name, func(v View) (map[string]string, error) {
		if !slices.Contains(v.Running, taskID) {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPRunning: withoutWords(v.Stamps.MCP.Running, taskID)}, nil
	})
	return err
}

// ReserveKey stamps an idempotency key on the instance before its task is
// made, so a repeat after a crash in between finds it.
func (h *Holder) ReserveKey(ctx context.Context, name, key string) error {
	_, err := h.Update(ctx, name, func(v View) (map[string]string, error) {
		return map[string]string{instance.KeyMCPTaskKeys: withWord(v.Stamps.MCP.TaskKeys, key)}, nil
	})
	return err
}

// FreeKey removes a key whose task was definitely not made.
func (h *Holder) FreeKey(ctx context.Context, name, key string) error {
	_, err := h.Update(ctx, name, func(v View) (map[string]string, error) {
		return map[string]string{instance.KeyMCPTaskKeys: withoutWords(v.Stamps.MCP.TaskKeys, key)}, nil
	})
	return err
}
