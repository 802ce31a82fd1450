package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// ListInstancesArgs: list_instances takes no arguments.
type ListInstancesArgs struct{}

// ListInstancesResult is list_instances' structured result.
type ListInstancesResult struct {
	Session      string         `json:"session" jsonschema:"this session's id"`
	Instances    []InstanceView `json:"instances" jsonschema:"every MCP instance of this host user: those this session holds, those other live sessions hold, and orphans"`
	MaxInstances int            `json:"max_instances"`
}

// InstanceView is one MCP instance.
type InstanceView struct {
	Instance       string         `json:"instance"`
	Template       string         `json:"template"`
	Status         string         `json:"status" jsonschema:"as Incus reports it, lowercased: running, stopped, …"`
	State          InstanceState  `json:"state" jsonschema:"creating or ready when this session holds it; held when another live session does; orphaned"`
	Kept           bool           `json:"kept" jsonschema:"handed over to the user with keep_instance: never destroyed by the orphan sweep"`
	Purpose        string         `json:"purpose,omitempty"`
	Holder         string         `json:"holder,omitempty" jsonschema:"the other live session that holds it"`
	CreatedAt      string         `json:"created_at,omitempty"`
	OrphanedAt     string         `json:"orphaned_at,omitempty"`
	DestroyAfter   string         `json:"destroy_after,omitempty" jsonschema:"when a later isx mcp may destroy the orphan"`
	DormantSince   string         `json:"dormant_since,omitempty" jsonschema:"when the orphan sweep stopped it as dormant"`
	IdempotencyKey string         `json:"idempotency_key,omitempty"`
	Tasks          []InstanceTask `json:"tasks" jsonschema:"its tasks as this session last saw them (unknown: nothing has read how it ended yet)"`
}

// InstanceTask is a task as a session last saw it.
type InstanceTask struct {
	TaskID   string    `json:"task_id"`
	Kind     TaskKind  `json:"kind"`
	Run      int       `json:"run"`
	State    TaskState `json:"state"`
	ExitCode *int      `json:"exit_code,omitempty" jsonschema:"how the run ended, when finished (-1: it ended without recording one)"`
}

var listInstancesTool = newTool[ListInstancesArgs, ListInstancesResult](mcpkit.Spec{
	Name: "list_instances", Annotations: readOnly(),
	Description: "List this host user's MCP instances: those this session holds (creating or ready, with their tasks as this session last saw them), those another live session holds, and orphans that adopt_instance can take back.",
})

func (s *Server) addInstanceTools() {
	addTool(s, listInstancesTool, s.listInstances)
	addTool(s, createInstanceTool, s.createInstance)
	addTool(s, adoptInstanceTool, s.adoptInstance)
	addTool(s, keepInstanceTool, s.keepInstance)
	addTool(s, destroyInstanceTool, s.destroyInstance)
	addTool(s, stopInstanceTool, s.stopInstance)
	addTool(s, startInstanceTool, s.startInstance)
}

func (s *Server) listInstances(ctx context.Context, c *call, _ ListInstancesArgs) (ListInstancesResult, string, error) {
	views, err := s.hold.Instances(ctx)
	if err != nil {
		return ListInstancesResult{}, "", err
	}
	s.work.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := s.hold.NoticeOrphans(ctx, views); err != nil {
			s.warnf("stamping orphans: %v", err)
		}
	})
	out := ListInstancesResult{Session: s.opts.Session, Instances: []InstanceView{}, MaxInstances: c.policy.MaxInstances}
	for _, v := range views {
		out.Instances = append(out.Instances, s.describeInstance(c, v))
	}
	return out, instancesText(out), nil
}

func (s *Server) describeInstance(c *call, v holding.View) InstanceView {
	m := v.Stamps.MCP
	view := InstanceView{
		Instance: v.Inst.Name, Template: v.Stamps.Template, Status: strings.ToLower(v.Inst.Status),
		Kept: m.Kept != "", Purpose: m.Purpose, IdempotencyKey: m.IdempotencyKey, Tasks: []InstanceTask{},
	}
	if !v.Stamps.Created.IsZero() {
		view.CreatedAt = instance.FormatTime(v.Stamps.Created)
	}
	switch v.HoldingFor(s.opts.Session) {
	case holding.HeldHere:
		view.State = InstanceReady
		if v.Creating() {
			view.State = InstanceCreating
		}
		view.Tasks = s.seenTasks(v.Inst.Name)
	case holding.HeldElsewhere:
		view.State, view.Holder = InstanceHeld, m.Session
	case holding.Orphaned:
		view.State = InstanceOrphaned
		if at, ok := v.OrphanedAt(); ok {
			view.OrphanedAt = instance.FormatTime(at)
			if !view.Kept {
				view.DestroyAfter = instance.FormatTime(at.Add(c.policy.OrphanGrace()))
			}
		}
		if at, ok := v.DormantAt(); ok {
			view.DormantSince = instance.FormatTime(at)
		}
	}
	return view
}

func instancesText(out ListInstancesResult) string {
	if len(out.Instances) == 0 {
		return "No MCP instances. create_instance makes one."
	}
	var b strings.Builder
	for _, i := range out.Instances {
		fmt.Fprintf(&b, "- %s (%s, %s, %s", i.Instance, i.Template, i.Status, i.State)
		if i.Kept {
			b.WriteString(", kept")
		}
		b.WriteString(")")
		if i.Purpose != "" {
			fmt.Fprintf(&b, ": %s", i.Purpose)
		}
		for _, t := range i.Tasks {
			fmt.Fprintf(&b, "\n    task %s (%s): %s", t.TaskID, t.Kind, t.State)
			if t.ExitCode != nil {
				fmt.Fprintf(&b, ", exit code %d", *t.ExitCode)
			}
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d of at most %d.", len(out.Instances), out.MaxInstances)
	return b.String()
}

// InstanceArgs name one instance.
type InstanceArgs struct {
	Instance InstanceName `json:"instance" jsonschema:"an MCP instance this session holds"`
}
