package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// DestroyInstanceResult is destroy_instance's structured result.
type DestroyInstanceResult struct {
	Instance  string `json:"instance"`
	Destroyed bool   `json:"destroyed"`
}

var destroyInstanceTool = newTool[InstanceArgs, DestroyInstanceResult](mcpkit.Spec{
	Name: "destroy_instance", Annotations: acting(true),
	Description: "Destroy an instance this session holds, with everything in it. Kept instances, and instances a person is in, are refused.",
})

func (s *Server) destroyInstance(ctx context.Context, _ *call, args InstanceArgs) (DestroyInstanceResult, string, error) {
	name := string(args.Instance)
	v, _, refusal := s.hold.Lookup(ctx, name)
	if refusal != nil {
		return DestroyInstanceResult{}, "", refusal
	}
	// An unfinished instance of this session may be destroyed too.
	if v.HoldingFor(s.opts.Session) != holding.HeldHere || !v.Creating() {
		if _, _, refusal := s.hold.Held(ctx, name); refusal != nil {
			return DestroyInstanceResult{}, "", refusal
		}
	}
	allow := func(v holding.View) error {
		switch {
		case v.HoldingFor(s.opts.Session) != holding.HeldHere:
			return holding.TakenElsewhere(name)
		case v.Stamps.MCP.Kept != "":
			return refusef(CodeWrongState, "instance %s was kept for the user with keep_instance; only the user destroys it (isx destroy %s)", name, name).On(aboutInstance, name)
		case instance.Attended(s.opts.Home, s.opts.Client.ProjectName(), name):
			return refusef(CodeBusy, "a person is in instance %s with isx shell; it is not destroyed under them", name).On(aboutInstance, name)
		}
		return nil
	}
	err := s.hold.MarkAndAct(ctx, name, holding.StateDestroying, allow, func() error {
		err := s.opts.Client.DeleteInstance(ctx, name, true)
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return DestroyInstanceResult{}, "", err
	}
	s.notifier.lost(name, s.seen.Drop(name))
	return DestroyInstanceResult{Instance: name, Destroyed: true}, fmt.Sprintf("Destroyed %s.", name), nil
}

// StopInstanceArgs are stop_instance's arguments.
type StopInstanceArgs struct {
	Instance InstanceName `json:"instance" jsonschema:"an MCP instance this session holds"`
	Force    bool         `json:"force,omitempty" jsonschema:"cancel running tasks first; without it an instance with running tasks is not stopped"`
}

// StopInstanceResult is stop_instance's structured result.
type StopInstanceResult struct {
	Instance       string   `json:"instance"`
	Status         string   `json:"status"`
	CancelledTasks []string `json:"cancelled_tasks" jsonschema:"tasks force cancelled; their state is unknown until task_status reads it"`
}

var stopInstanceTool = newTool[StopInstanceArgs, StopInstanceResult](mcpkit.Spec{
	Name: "stop_instance", Annotations: acting(false),
	Description: "Stop an instance this session holds. One with running tasks is refused unless force: true, which cancels them first.",
})

func (s *Server) stopInstance(ctx context.Context, _ *call, args StopInstanceArgs) (StopInstanceResult, string, error) {
	name := string(args.Instance)
	v, _, refusal := s.hold.Held(ctx, name)
	if refusal != nil {
		return StopInstanceResult{}, "", refusal
	}
	out := StopInstanceResult{Instance: name, Status: strings.ToLower(v.Inst.Status), CancelledTasks: []string{}}
	if !v.Inst.Running() {
		return out, fmt.Sprintf("%s is already %s.", name, out.Status), nil
	}
	infos, err := task.List(ctx, s.opts.Client, name)
	if err != nil {
		return out, "", err
	}
	var running []task.Info
	for _, info := range infos {
		s.observe(name, info)
		if info.State == task.StateRunning {
			running = append(running, info)
		}
	}
	if len(running) > 0 && !args.Force {
		ids := make([]string, 0, len(running))
		for _, info := range running {
			ids = append(ids, info.ID)
		}
		return out, "", refusef(CodeWrongState, "instance %s has running tasks (%s); cancel_task them, or stop_instance with force: true to cancel them first", name, strings.Join(ids, ", ")).On(aboutInstance, name)
	}
	for _, info := range running {
		if _, err := task.Cancel(ctx, s.opts.Client, name, info.ID); err != nil {
			return out, "", err
		}
		s.seen.Forget(name, info.ID, info.Run)
		out.CancelledTasks = append(out.CancelledTasks, info.ID)
	}
	err = s.hold.MarkAndAct(ctx, name, holding.StateStopping, func(v holding.View) error {
		if v.HoldingFor(s.opts.Session) != holding.HeldHere {
			return holding.TakenElsewhere(name)
		}
		return nil
	}, func() error {
		return s.opts.Client.StopInstance(ctx, name, incus.StopOptions{Force: true, Timeout: holding.StopTimeout})
	})
	// The mark is lifted whether or not the stop worked.
	if _, clearErr := s.hold.Update(context.WithoutCancel(ctx), name, func(v holding.View) (map[string]string, error) {
		if v.State != holding.StateStopping {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPState: "", instance.KeyMCPRunning: ""}, nil
	}); clearErr != nil {
		err = errors.Join(err, clearErr)
	}
	if err != nil {
		return out, "", err
	}
	out.Status = "stopped"
	return out, fmt.Sprintf("Stopped %s.", name), nil
}

// StartInstanceResult is start_instance's structured result.
type StartInstanceResult struct {
	Instance string `json:"instance"`
	Status   string `json:"status"`
}

var startInstanceTool = newTool[InstanceArgs, StartInstanceResult](mcpkit.Spec{
	Name: "start_instance", Annotations: acting(false),
	Description: "Start a stopped instance this session holds and wait until it answers.",
})

func (s *Server) startInstance(ctx context.Context, c *call, args InstanceArgs) (StartInstanceResult, string, error) {
	name := string(args.Instance)
	v, _, refusal := s.hold.Held(ctx, name)
	if refusal != nil {
		return StartInstanceResult{}, "", refusal
	}
	if !v.Inst.Running() {
		if err := s.opts.Client.StartInstance(ctx, name); err != nil {
			return StartInstanceResult{}, "", err
		}
	}
	deadline := s.opts.Clock.Now().Add(time.Minute)
	for !s.hold.Answers(ctx, name) {
		if s.opts.Clock.Now().After(deadline) {
			return StartInstanceResult{}, "", refusef(CodeUnavailable, "instance %s started but does not answer", name).On(aboutInstance, name)
		}
		select {
		case <-ctx.Done():
			return StartInstanceResult{}, "", ctx.Err()
		case <-s.opts.Clock.After(200 * time.Millisecond):
		}
	}
	s.admit(ctx, c, name)
	return StartInstanceResult{Instance: name, Status: "running"}, fmt.Sprintf("%s is running.", name), nil
}
