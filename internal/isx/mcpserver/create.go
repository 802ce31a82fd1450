package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// CreateInstanceArgs are create_instance's arguments.
type CreateInstanceArgs struct {
	Template       string          `json:"template,omitempty" jsonschema:"an approved, built template (see list_templates); give this or from_instance"`
	FromInstance   InstanceName    `json:"from_instance,omitempty" jsonschema:"a stopped instance this session holds, to copy (its task records are not copied)"`
	NameHint       string          `json:"name_hint,omitempty" jsonschema:"1-16 of a-z, 0-9 and '-': the instance is named mcp-<template>-<hint>-<suffix> (default hint: work)" pattern:"^[a-z0-9-]{1,16}$"`
	Purpose        string          `json:"purpose,omitempty" jsonschema:"one line, at most 200 characters, shown to the user (isx list)" maxLength:"200"`
	IdempotencyKey *IdempotencyKey `json:"idempotency_key,omitempty" jsonschema:"1-64 of A-Za-z0-9._:-; a repeat returns the instance the key made, with replayed: true"`
}

// Validate checks what the schema cannot say: exactly one source, and a
// purpose of one line.
func (a *CreateInstanceArgs) Validate() error {
	switch {
	case a.Template == "" && a.FromInstance == "":
		return invalid("give template (see list_templates) or from_instance")
	case a.Template != "" && a.FromInstance != "":
		return invalid("give template or from_instance, not both")
	}
	return checkPurpose(a.Purpose)
}

// source is what the instance copies, as stamped in instance.KeyMCPSource.
func (a *CreateInstanceArgs) source() string {
	if a.FromInstance != "" {
		return "instance:" + string(a.FromInstance)
	}
	return "template:" + a.Template
}

// CreateInstanceResult is create_instance's structured result.
type CreateInstanceResult struct {
	Instance       string        `json:"instance"`
	Template       string        `json:"template"`
	Status         string        `json:"status"`
	State          InstanceState `json:"state"`
	Purpose        string        `json:"purpose,omitempty"`
	IdempotencyKey string        `json:"idempotency_key,omitempty"`
	Replayed       bool          `json:"replayed" jsonschema:"the key had already made this instance: nothing new was made"`
	Adopted        bool          `json:"adopted" jsonschema:"the replay took the instance over from an ended session"`
}

// defaultHint names an instance create_instance made without a name_hint.
const defaultHint = "work"

var createInstanceTool = newTool[CreateInstanceArgs, CreateInstanceResult](mcpkit.Spec{
	Name: "create_instance", Annotations: acting(false),
	Description: "Make a disposable instance from an approved, built template (or copy a stopped instance this session holds), with the template's defaults (network, credentials, resources), start it and hold it in this session. It is named mcp-<template>-<name_hint>-<suffix>. With idempotency_key, a repeat returns the instance the key made (replayed: true), adopting it if its session ended.",
})

func (s *Server) createInstance(ctx context.Context, c *call, args CreateInstanceArgs) (CreateInstanceResult, string, error) {
	key := keyOf(args.IdempotencyKey)
	if args.Template != "" && !c.policy.Approves(args.Template) {
		return CreateInstanceResult{}, "", notApproved(args.Template, c.policy.Path)
	}
	// Only calls with one key wait for each other: creations without a
	// key, or with different keys, run at once.
	if key != "" {
		defer s.keys.Lock("instance:" + key)()
		views, err := s.hold.Instances(ctx)
		if err != nil {
			return CreateInstanceResult{}, "", err
		}
		for _, v := range views {
			if v.Stamps.MCP.IdempotencyKey == key {
				return s.replayCreate(ctx, v, args)
			}
		}
	}
	// Incus is read once before the source is checked, so that a daemon
	// that does not answer is said before anything else.
	if _, err := s.hold.Instances(ctx); err != nil {
		return CreateInstanceResult{}, "", err
	}
	from, tpl, fork, refusal := s.creationSource(ctx, c, args)
	if refusal != nil {
		return CreateInstanceResult{}, "", refusal
	}
	reserved, _, err := s.hold.ReserveInstance(ctx, c.policy.MaxInstances)
	if err != nil {
		return CreateInstanceResult{}, "", err
	}
	defer reserved.Release()
	hint := args.NameHint
	if hint == "" {
		hint = defaultHint
	}
	name, existing, err := s.hold.Make(ctx, holding.Making{
		From: from, Template: tpl, Hint: hint, Key: key, Source: args.source(),
		Purpose: args.Purpose, Caller: callerOf(c.session), Warm: s.pickWarm(ctx, fork, tpl),
	}, reserved)
	switch {
	case existing != nil:
		return s.replayCreate(ctx, *existing, args)
	case err != nil && name != "":
		// Incus may have made it before it stopped answering, and a
		// failed Branch cannot remove it while Incus is away.
		return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
	case err != nil:
		return CreateInstanceResult{}, "", err
	}
	defer s.hold.Made(name)
	if err := s.hold.Finish(ctx, name, fork); err != nil {
		return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
	}
	s.admit(ctx, c, name)
	out := CreateInstanceResult{Instance: name, Template: tpl, Status: "running", State: InstanceReady, Purpose: args.Purpose, IdempotencyKey: key}
	return out, fmt.Sprintf("Made %s from %s; it is running and held by this session. exec runs commands in it; destroy_instance when done.", name, args.Template+string(args.FromInstance)), nil
}

// pickWarm names a warm copy of the template for Make to take, or "" to
// copy the template as without a pool (a fork, no pool, an empty one). A
// pool that cannot be read is no reason to refuse: the copy is made cold.
func (s *Server) pickWarm(ctx context.Context, fork bool, tpl string) string {
	if fork || s.pool == nil {
		return ""
	}
	name, err := s.pool.Pick(ctx, tpl)
	if err != nil {
		s.warnf("warm pool of %s not used: %v", tpl, err)
	}
	return name
}

// refusedCreate removes an instance that did not become ready and says
// why: a refused create_instance leaves nothing behind, so a retry starts
// afresh (with a key too: the key made nothing that is left).
func (s *Server) refusedCreate(ctx context.Context, name string, err error) *coded.Error {
	r := refusalOf(err)
	if r.Code == CodeInternal {
		r.Code = CodeUnavailable
	}
	if abandonErr := s.hold.Abandon(ctx, name); abandonErr != nil {
		r.Message = fmt.Sprintf("instance %s was made but did not become ready (%s), and it could not be removed: %v", name, r.Message, abandonErr)
		return r.On(aboutInstance, name)
	}
	r.Message = fmt.Sprintf("instance %s did not become ready (%s) and was removed again; nothing is left of it, so try again", name, r.Message)
	return r
}

// creationSource checks what create_instance copies: an approved, usable
// template, or a stopped instance of this session made from one. It
// returns the Incus instance to copy, the template and whether it is a
// fork.
func (s *Server) creationSource(ctx context.Context, c *call, args CreateInstanceArgs) (from, tpl string, fork bool, err error) {
	if args.FromInstance != "" {
		from := string(args.FromInstance)
		v, _, err := s.hold.Held(ctx, from)
		if err != nil {
			return "", "", false, err
		}
		if v.Inst.Status != incus.StatusStopped {
			return "", "", false, refusef(CodeWrongState, "instance %s is %s; stop_instance it before copying it", from, strings.ToLower(v.Inst.Status)).On(aboutInstance, from)
		}
		tpl = v.Stamps.Template
		if !c.policy.Approves(tpl) {
			return "", "", false, refusef(CodeNotApproved, "instance %s was made from template %s, which mcp.yaml no longer approves; ask the user", from, tpl)
		}
		set, err := s.opts.Templates()
		if err != nil {
			return "", "", false, err
		}
		if err := set.Approvable(tpl); err != nil {
			return "", "", false, refusef(CodeNotApproved, "%s", refusalOf(err).Message)
		}
		if v.Stamps.Source == "project-local" {
			return "", "", false, refusef(CodeNotApproved, "instance %s comes from a project-local build, which can never be used through MCP", from)
		}
		return from, tpl, true, nil
	}
	tpl = args.Template
	if !c.policy.Approves(tpl) {
		return "", "", false, notApproved(tpl, c.policy.Path)
	}
	set, err := s.opts.Templates()
	if err != nil {
		return "", "", false, err
	}
	inst, _, err := s.opts.Client.GetInstance(ctx, tpl)
	if errors.Is(err, incus.ErrNotFound) {
		inst, err = nil, nil
	}
	if err != nil {
		return "", "", false, err
	}
	if refusal := usable(set, inst, tpl); refusal != nil {
		return "", "", false, refusal
	}
	return tpl, tpl, false, nil
}

func notApproved(tpl, path string) *coded.Error {
	return refusef(CodeNotApproved, "template %s is not approved for agents; the user approves templates in %s (templates:) or with isx init, and agents cannot", tpl, path)
}

// replayCreate answers a repeat of a key that already made v (ISX-159):
// the same instance, taken over when it is an orphan (ISX-162), finished
// when the first call was cut short; refused when the repeat asks for
// something else (ISX-165) or the instance was kept (ISX-169).
func (s *Server) replayCreate(ctx context.Context, v holding.View, args CreateInstanceArgs) (CreateInstanceResult, string, error) {
	name, key := v.Inst.Name, keyOf(args.IdempotencyKey)
	if v.Stamps.MCP.Kept != "" {
		return CreateInstanceResult{}, "", refusef(CodeWrongState, "idempotency key %q made instance %s, which was kept for the user with keep_instance; look it up with list_instances instead of retrying", key, name).On(aboutInstance, name)
	}
	if was := v.Stamps.MCP.Source; was != args.source() {
		return CreateInstanceResult{}, "", refusef(CodeInvalidArgument, "idempotency key %q made instance %s from %s, not from %s; a repeat must ask for the same thing, so use another key for something else",
			key, name, strings.Replace(was, ":", " ", 1), strings.Replace(args.source(), ":", " ", 1)).On(aboutInstance, name)
	}
	adopted := false
	switch v.HoldingFor(s.opts.Session) {
	case holding.HeldElsewhere:
		if v.Creating() {
			return CreateInstanceResult{}, "", refusef(CodeBusy, "idempotency key %q is making instance %s in another live session (%s) right now; retry shortly", key, name, v.Stamps.MCP.Session).On(aboutInstance, name)
		}
		return CreateInstanceResult{}, "", refusef(CodeNotHeld, "idempotency key %q made instance %s, which another live session (%s) holds; adopt_instance with force: true takes it", key, name, v.Stamps.MCP.Session).On(aboutInstance, name)
	case holding.Orphaned:
		taken, _, err := s.hold.TakeOver(ctx, name, false)
		if err != nil {
			return CreateInstanceResult{}, "", err
		}
		v, adopted = taken, true
		s.adoptTasks(ctx, v)
	}
	if v.Creating() {
		if err := s.hold.Finish(ctx, name, strings.HasPrefix(v.Stamps.MCP.Source, "instance:")); err != nil {
			return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
		}
		inst, _, err := s.opts.Client.GetInstance(ctx, name)
		if err != nil {
			return CreateInstanceResult{}, "", err
		}
		v = holding.ViewOf(inst)
	}
	out := CreateInstanceResult{
		Instance: name, Template: v.Stamps.Template, Status: strings.ToLower(v.Inst.Status), State: InstanceReady,
		Purpose: v.Stamps.MCP.Purpose, IdempotencyKey: key, Replayed: true, Adopted: adopted,
	}
	text := fmt.Sprintf("Idempotency key %q had already made %s; nothing new was made (replayed).", key, name)
	if adopted {
		text += " It was an orphan and this session now holds it."
	}
	return out, text, nil
}
