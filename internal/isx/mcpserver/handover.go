package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// AdoptInstanceArgs are adopt_instance's arguments.
type AdoptInstanceArgs struct {
	Instance InstanceName `json:"instance" jsonschema:"an orphan (or, with force, an instance another live session holds)"`
	Force    bool         `json:"force,omitempty" jsonschema:"take it from a live session too; that session's calls on it are then refused"`
}

// AdoptInstanceResult is adopt_instance's structured result.
type AdoptInstanceResult struct {
	Instance        string         `json:"instance"`
	Template        string         `json:"template"`
	Status          string         `json:"status"`
	State           InstanceState  `json:"state"`
	Adopted         bool           `json:"adopted" jsonschema:"false when this session already held it"`
	PreviousSession string         `json:"previous_session,omitempty"`
	Tasks           []InstanceTask `json:"tasks" jsonschema:"its tasks as read now (empty while it is stopped)"`
}

var adoptInstanceTool = newTool[AdoptInstanceArgs, AdoptInstanceResult](mcpkit.Spec{
	Name: "adopt_instance", Annotations: acting(false),
	Description: "Take an orphan (an instance whose session ended) into this session, with its tasks. With force: true, take an instance from another live session, which then loses it.",
})

func (s *Server) adoptInstance(ctx context.Context, _ *call, args AdoptInstanceArgs) (AdoptInstanceResult, string, error) {
	v, previous, err := s.hold.TakeOver(ctx, string(args.Instance), args.Force)
	if err != nil {
		return AdoptInstanceResult{}, "", err
	}
	s.adoptTasks(ctx, v)
	state := InstanceReady
	if v.Creating() {
		state = InstanceCreating
	}
	out := AdoptInstanceResult{
		Instance: v.Inst.Name, Template: v.Stamps.Template, Status: strings.ToLower(v.Inst.Status), State: state,
		Adopted: previous != "", PreviousSession: previous, Tasks: s.seenTasks(v.Inst.Name),
	}
	text := fmt.Sprintf("This session now holds %s (%s) with %d task(s).", out.Instance, out.Status, len(out.Tasks))
	if !out.Adopted {
		text = fmt.Sprintf("This session already holds %s.", out.Instance)
	}
	if state == InstanceCreating {
		text += " It was not finished: repeat create_instance with its idempotency key to finish it."
	}
	return out, text, nil
}

// adoptTasks reads the tasks of an instance this session just took, so
// that list_instances shows them.
func (s *Server) adoptTasks(ctx context.Context, v holding.View) {
	if !v.Inst.Running() || v.Creating() {
		return
	}
	infos, err := task.List(ctx, s.opts.Client, v.Inst.Name)
	if err != nil {
		s.warnf("reading the tasks of %s: %v", v.Inst.Name, err)
		return
	}
	for _, info := range infos {
		s.observe(v.Inst.Name, info)
	}
}

// KeepInstanceResult is keep_instance's structured result.
type KeepInstanceResult struct {
	Instance string `json:"instance"`
	Kept     bool   `json:"kept"`
	Purpose  string `json:"purpose,omitempty"`
}

var keepInstanceTool = newTool[InstanceArgs, KeepInstanceResult](mcpkit.Spec{
	Name: "keep_instance", Annotations: acting(false),
	Description: "Hand an instance over to the user: it is marked kept, is never destroyed by the orphan sweep and destroy_instance refuses it. Use it for something the user should look at.",
})

func (s *Server) keepInstance(ctx context.Context, _ *call, args InstanceArgs) (KeepInstanceResult, string, error) {
	name := string(args.Instance)
	if _, _, err := s.hold.Held(ctx, name); err != nil {
		return KeepInstanceResult{}, "", err
	}
	v, err := s.hold.Keep(ctx, name)
	if err != nil {
		return KeepInstanceResult{}, "", err
	}
	out := KeepInstanceResult{Instance: name, Kept: true, Purpose: v.Stamps.MCP.Purpose}
	return out, fmt.Sprintf("%s is kept for the user: the orphan sweep never destroys it and destroy_instance refuses it; the user removes it with `isx destroy %s`.", name, name), nil
}
