package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
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
	views, err := s.userInstances(ctx)
	if err != nil {
		return ListInstancesResult{}, "", err
	}
	s.work.Go(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := s.stamper().noticeOrphans(ctx, views); err != nil {
			s.warnf("stamping orphans: %v", err)
		}
	})
	out := ListInstancesResult{Session: s.opts.Session, Instances: []InstanceView{}, MaxInstances: c.policy.MaxInstances}
	for _, v := range views {
		out.Instances = append(out.Instances, s.describeInstance(c, v))
	}
	return out, instancesText(out), nil
}

func (s *Server) describeInstance(c *call, v mcpView) InstanceView {
	m := v.stamps.MCP
	view := InstanceView{
		Instance: v.inst.Name, Template: v.stamps.Template, Status: strings.ToLower(v.inst.Status),
		Kept: m.Kept != "", Purpose: m.Purpose, IdempotencyKey: m.IdempotencyKey, Tasks: []InstanceTask{},
	}
	if !v.stamps.Created.IsZero() {
		view.CreatedAt = formatTime(v.stamps.Created)
	}
	switch v.holdingFor(s.opts.Session) {
	case heldHere:
		view.State = InstanceReady
		if v.creating() {
			view.State = InstanceCreating
		}
		view.Tasks = s.tasks.tasks(v.inst.Name)
	case heldElsewhere:
		view.State, view.Holder = InstanceHeld, m.Session
	case orphaned:
		view.State = InstanceOrphaned
		if at, ok := v.orphanedAt(); ok {
			view.OrphanedAt = formatTime(at)
			if !view.Kept {
				view.DestroyAfter = formatTime(at.Add(c.policy.OrphanGrace()))
			}
		}
		if at, ok := v.dormantAt(); ok {
			view.DormantSince = formatTime(at)
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
		defer s.keys.lock("instance:" + key)()
		views, err := s.userInstances(ctx)
		if err != nil {
			return CreateInstanceResult{}, "", err
		}
		for _, v := range views {
			if v.stamps.MCP.IdempotencyKey == key {
				return s.replayCreate(ctx, v, args)
			}
		}
	}
	views, err := s.userInstances(ctx)
	if err != nil {
		return CreateInstanceResult{}, "", err
	}
	from, tpl, fork, refusal := s.creationSource(ctx, c, views, args)
	if refusal != nil {
		return CreateInstanceResult{}, "", refusal
	}
	reserved, _, refusal := s.reserveInstance(ctx, c.policy.MaxInstances)
	if refusal != nil {
		return CreateInstanceResult{}, "", refusal
	}
	defer reserved.release()
	hint := args.NameHint
	if hint == "" {
		hint = defaultHint
	}
	stamps := instance.MCPStamps{
		Session: s.opts.Session, Owner: s.opts.Owner, Purpose: args.Purpose,
		Caller: callerOf(c.session), IdempotencyKey: key,
	}.Config()
	stamps[instance.KeyMCPState] = stateCreating
	stamps[instance.KeyMCPSource] = args.source()
	name, err := s.branch(ctx, from, tpl, hint, key, stamps, reserved)
	if err != nil {
		var replay *replayInstead
		if errors.As(err, &replay) {
			return s.replayCreate(ctx, replay.view, args)
		}
		if name != "" {
			// Incus may have made it before it stopped answering, and a
			// failed Branch cannot remove it while Incus is away.
			return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
		}
		return CreateInstanceResult{}, "", err
	}
	defer s.inflight.Delete(name)
	if err := s.finishCreating(ctx, name, fork); err != nil {
		return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
	}
	s.admit(ctx, c, name)
	out := CreateInstanceResult{Instance: name, Template: tpl, Status: "running", State: InstanceReady, Purpose: args.Purpose, IdempotencyKey: key}
	return out, fmt.Sprintf("Made %s from %s; it is running and held by this session. exec runs commands in it; destroy_instance when done.", name, args.Template+string(args.FromInstance)), nil
}

// refusedCreate removes an instance that did not become ready and says
// why: a refused create_instance leaves nothing behind, so a retry starts
// afresh (with a key too: the key made nothing that is left).
func (s *Server) refusedCreate(ctx context.Context, name string, err error) *Refusal {
	r := asRefusal(err)
	if r.Code == CodeInternal {
		r.Code = CodeUnavailable
	}
	if abandonErr := s.abandon(ctx, name); abandonErr != nil {
		r.Message = fmt.Sprintf("instance %s was made but did not become ready (%s), and it could not be removed: %v", name, r.Message, abandonErr)
		return r.on(name, "")
	}
	r.Message = fmt.Sprintf("instance %s did not become ready (%s) and was removed again; nothing is left of it, so try again", name, r.Message)
	return r
}

// creationSource checks what create_instance copies: an approved, usable
// template, or a stopped instance of this session made from one. It
// returns the Incus instance to copy, the template and whether it is a
// fork.
func (s *Server) creationSource(ctx context.Context, c *call, views []mcpView, args CreateInstanceArgs) (from, tpl string, fork bool, refusal *Refusal) {
	if args.FromInstance != "" {
		from := string(args.FromInstance)
		v, _, refusal := s.held(ctx, from)
		if refusal != nil {
			return "", "", false, refusal
		}
		if v.inst.Status != incus.StatusStopped {
			return "", "", false, refusef(CodeWrongState, "instance %s is %s; stop_instance it before copying it", from, strings.ToLower(v.inst.Status)).on(from, "")
		}
		tpl = v.stamps.Template
		if !c.policy.Approves(tpl) {
			return "", "", false, refusef(CodeNotApproved, "instance %s was made from template %s, which mcp.yaml no longer approves; ask the user", from, tpl)
		}
		set, err := s.opts.Templates()
		if err != nil {
			return "", "", false, asRefusal(err)
		}
		if err := set.Approvable(tpl); err != nil {
			return "", "", false, refusef(CodeNotApproved, "%s", asRefusal(err).Message)
		}
		if v.stamps.Source == "project-local" {
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
		return "", "", false, asRefusal(err)
	}
	inst, _, err := s.opts.Client.GetInstance(ctx, tpl)
	if errors.Is(err, incus.ErrNotFound) {
		inst, err = nil, nil
	}
	if err != nil {
		return "", "", false, asRefusal(err)
	}
	if refusal := usable(set, inst, tpl); refusal != nil {
		return "", "", false, refusal
	}
	return tpl, tpl, false, nil
}

func notApproved(tpl, path string) *Refusal {
	return refusef(CodeNotApproved, "template %s is not approved for agents; the user approves templates in %s (templates:) or with isx init, and agents cannot", tpl, path)
}

// replayInstead says a keyed creation found the key's instance after all.
type replayInstead struct{ view mcpView }

func (r *replayInstead) Error() string { return "replay " + r.view.inst.Name }

// branch makes the instance under a new name, which it returns even when
// the making failed. A keyed creation's suffix comes from the owner and
// key, so two sessions creating with one key at once collide on the name
// in Incus and the later one replays, or hears busy while the first is
// still making it.
func (s *Server) branch(ctx context.Context, from, tpl, hint, key string, stamps map[string]string, reserved *reservation) (string, error) {
	manager := &instance.Manager{Client: s.opts.Client, Clock: s.opts.Clock, ProxyDir: s.proxyDir()}
	for attempt := range maxAttempts {
		var suffix string
		if key != "" && attempt == 0 {
			suffix = keySuffix(s.opts.Owner, key)
		} else {
			var err error
			if suffix, err = randomSuffix(s.opts.Random); err != nil {
				return "", err
			}
		}
		name := instanceName(tpl, hint, suffix)
		reserved.named(name)
		s.inflight.Store(name, true)
		err := manager.Branch(ctx, instance.BranchOptions{Name: name, From: from, Owner: s.opts.Owner, Config: stamps})
		if err == nil {
			// Stays in flight until the caller has finished it.
			return name, nil
		}
		s.inflight.Delete(name)
		if coded.CodeOf(err) != instance.CodeExists {
			return name, err
		}
		if key != "" && attempt == 0 {
			views, listErr := s.userInstances(ctx)
			if listErr != nil {
				return "", listErr
			}
			for _, v := range views {
				if v.stamps.MCP.IdempotencyKey == key {
					return "", &replayInstead{view: v}
				}
			}
			// The key's name is taken by a creation Incus does not list
			// yet: another session is making the key's instance.
			return "", refusef(CodeBusy, "idempotency key %q is making instance %s in another session right now; retry shortly", key, name).on(name, "")
		}
	}
	return "", refusef(CodeBusy, "no free instance name found for template %s; retry", tpl)
}

// instanceName is mcp-<template without tpl->-<hint>-<suffix>, the
// template part shortened to keep within Incus's 63 characters.
func instanceName(tpl, hint, suffix string) string {
	base := strings.TrimPrefix(tpl, "tpl-")
	room := maxInstanceName - len("mcp-") - len(hint) - len(suffix) - 2
	if len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return "mcp-" + base + "-" + hint + "-" + suffix
}

var suffixEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// randomSuffix is five random characters of a-z and 2-7.
func randomSuffix(random io.Reader) (string, error) {
	raw := make([]byte, 4)
	if _, err := io.ReadFull(random, raw); err != nil {
		return "", fmt.Errorf("drawing a name suffix: %w", err)
	}
	return strings.ToLower(suffixEncoding.EncodeToString(raw))[:5], nil
}

// keySuffix is five characters of a-z and 2-7 derived from owner and key.
func keySuffix(owner, key string) string {
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	return strings.ToLower(suffixEncoding.EncodeToString(sum[:4]))[:5]
}

// replayCreate answers a repeat of a key that already made v (ISX-159):
// the same instance, taken over when it is an orphan (ISX-162), finished
// when the first call was cut short; refused when the repeat asks for
// something else (ISX-165) or the instance was kept (ISX-169).
func (s *Server) replayCreate(ctx context.Context, v mcpView, args CreateInstanceArgs) (CreateInstanceResult, string, error) {
	name, key := v.inst.Name, keyOf(args.IdempotencyKey)
	if v.stamps.MCP.Kept != "" {
		return CreateInstanceResult{}, "", refusef(CodeWrongState, "idempotency key %q made instance %s, which was kept for the user with keep_instance; look it up with list_instances instead of retrying", key, name).on(name, "")
	}
	if was := v.stamps.MCP.Source; was != args.source() {
		return CreateInstanceResult{}, "", refusef(CodeInvalidArgument, "idempotency key %q made instance %s from %s, not from %s; a repeat must ask for the same thing, so use another key for something else",
			key, name, strings.Replace(was, ":", " ", 1), strings.Replace(args.source(), ":", " ", 1)).on(name, "")
	}
	adopted := false
	switch v.holdingFor(s.opts.Session) {
	case heldElsewhere:
		if v.creating() {
			return CreateInstanceResult{}, "", refusef(CodeBusy, "idempotency key %q is making instance %s in another live session (%s) right now; retry shortly", key, name, v.stamps.MCP.Session).on(name, "")
		}
		return CreateInstanceResult{}, "", refusef(CodeNotHeld, "idempotency key %q made instance %s, which another live session (%s) holds; adopt_instance with force: true takes it", key, name, v.stamps.MCP.Session).on(name, "")
	case orphaned:
		taken, _, refusal := s.takeOver(ctx, name, false)
		if refusal != nil {
			return CreateInstanceResult{}, "", refusal
		}
		v, adopted = taken, true
		s.adoptTasks(ctx, v)
	}
	if v.creating() {
		if err := s.finishCreating(ctx, name, strings.HasPrefix(v.stamps.MCP.Source, "instance:")); err != nil {
			return CreateInstanceResult{}, "", s.refusedCreate(ctx, name, err)
		}
		inst, _, err := s.opts.Client.GetInstance(ctx, name)
		if err != nil {
			return CreateInstanceResult{}, "", err
		}
		v = viewOf(inst)
	}
	out := CreateInstanceResult{
		Instance: name, Template: v.stamps.Template, Status: strings.ToLower(v.inst.Status), State: InstanceReady,
		Purpose: v.stamps.MCP.Purpose, IdempotencyKey: key, Replayed: true, Adopted: adopted,
	}
	text := fmt.Sprintf("Idempotency key %q had already made %s; nothing new was made (replayed).", key, name)
	if adopted {
		text += " It was an orphan and this session now holds it."
	}
	return out, text, nil
}

// readyTimeout bounds waiting for a new instance to run and answer.
const readyTimeout = 3 * time.Minute

// finishCreating waits until the instance runs and answers an exec, clears
// a fork's copied task records, and removes the creating mark. It also
// finishes an instance whose creating call was cut short: Incus goes on
// with a copy its caller no longer waits for.
func (s *Server) finishCreating(ctx context.Context, name string, fork bool) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		inst, _, err := s.opts.Client.GetInstance(ctx, name)
		if err != nil {
			return err
		}
		if inst.Running() && s.answers(ctx, name) {
			break
		}
		if inst.Status == incus.StatusStopped {
			// Fails while the copy is still under way; the next turn
			// tries again.
			_ = s.opts.Client.StartInstance(ctx, name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.opts.Clock.After(250 * time.Millisecond):
		}
	}
	if fork {
		if _, err := task.Clear(ctx, s.opts.Client, name); err != nil {
			return err
		}
	}
	_, err := s.update(ctx, name, func(v mcpView) (map[string]string, error) {
		if !v.creating() {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPState: "", instance.KeyMCPRunning: "", instance.KeyMCPTaskKeys: ""}, nil
	})
	return err
}

// answers reports whether the instance runs a command.
func (s *Server) answers(ctx context.Context, name string) bool {
	res, err := s.opts.Client.Exec(ctx, name, incus.ExecRequest{Command: []string{"true"}, Timeout: 10 * time.Second})
	return err == nil && res.ExitCode == 0
}

// InstanceArgs name one instance.
type InstanceArgs struct {
	Instance InstanceName `json:"instance" jsonschema:"an MCP instance this session holds"`
}

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
	v, previous, refusal := s.takeOver(ctx, string(args.Instance), args.Force)
	if refusal != nil {
		return AdoptInstanceResult{}, "", refusal
	}
	s.adoptTasks(ctx, v)
	state := InstanceReady
	if v.creating() {
		state = InstanceCreating
	}
	out := AdoptInstanceResult{
		Instance: v.inst.Name, Template: v.stamps.Template, Status: strings.ToLower(v.inst.Status), State: state,
		Adopted: previous != "", PreviousSession: previous, Tasks: s.tasks.tasks(v.inst.Name),
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
func (s *Server) adoptTasks(ctx context.Context, v mcpView) {
	if !v.inst.Running() || v.creating() {
		return
	}
	infos, err := task.List(ctx, s.opts.Client, v.inst.Name)
	if err != nil {
		s.warnf("reading the tasks of %s: %v", v.inst.Name, err)
		return
	}
	for _, info := range infos {
		s.observe(v.inst.Name, info)
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
	if _, _, refusal := s.held(ctx, name); refusal != nil {
		return KeepInstanceResult{}, "", refusal
	}
	v, err := s.update(ctx, name, func(v mcpView) (map[string]string, error) {
		if v.holdingFor(s.opts.Session) != heldHere {
			return nil, takenElsewhere(name)
		}
		if v.stamps.MCP.Kept != "" {
			return nil, nil
		}
		return map[string]string{instance.KeyMCPKept: formatTime(s.opts.Clock.Now()) + " " + s.opts.Session}, nil
	})
	if err != nil {
		return KeepInstanceResult{}, "", err
	}
	out := KeepInstanceResult{Instance: name, Kept: true, Purpose: v.stamps.MCP.Purpose}
	return out, fmt.Sprintf("%s is kept for the user: the orphan sweep never destroys it and destroy_instance refuses it; the user removes it with `isx destroy %s`.", name, name), nil
}

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
	v, _, refusal := s.lookup(ctx, name)
	if refusal != nil {
		return DestroyInstanceResult{}, "", refusal
	}
	// An unfinished instance of this session may be destroyed too.
	if v.holdingFor(s.opts.Session) != heldHere || !v.creating() {
		if _, _, refusal := s.held(ctx, name); refusal != nil {
			return DestroyInstanceResult{}, "", refusal
		}
	}
	allow := func(v mcpView) *Refusal {
		switch {
		case v.holdingFor(s.opts.Session) != heldHere:
			return takenElsewhere(name)
		case v.stamps.MCP.Kept != "":
			return refusef(CodeWrongState, "instance %s was kept for the user with keep_instance; only the user destroys it (isx destroy %s)", name, name).on(name, "")
		case instance.Attended(s.opts.Home, s.opts.Client.ProjectName(), name):
			return refusef(CodeBusy, "a person is in instance %s with isx shell; it is not destroyed under them", name).on(name, "")
		}
		return nil
	}
	err := s.markAndAct(ctx, name, stateDestroying, allow, func() error {
		err := s.opts.Client.DeleteInstance(ctx, name, true)
		if errors.Is(err, incus.ErrNotFound) {
			return nil
		}
		return err
	})
	if err != nil {
		return DestroyInstanceResult{}, "", err
	}
	s.notifier.lost(name, s.tasks.drop(name))
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

// stopTimeout is how long an instance may take to shut down cleanly
// before it is killed.
const stopTimeout = 5 * time.Second

var stopInstanceTool = newTool[StopInstanceArgs, StopInstanceResult](mcpkit.Spec{
	Name: "stop_instance", Annotations: acting(false),
	Description: "Stop an instance this session holds. One with running tasks is refused unless force: true, which cancels them first.",
})

func (s *Server) stopInstance(ctx context.Context, _ *call, args StopInstanceArgs) (StopInstanceResult, string, error) {
	name := string(args.Instance)
	v, _, refusal := s.held(ctx, name)
	if refusal != nil {
		return StopInstanceResult{}, "", refusal
	}
	out := StopInstanceResult{Instance: name, Status: strings.ToLower(v.inst.Status), CancelledTasks: []string{}}
	if !v.inst.Running() {
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
		return out, "", refusef(CodeWrongState, "instance %s has running tasks (%s); cancel_task them, or stop_instance with force: true to cancel them first", name, strings.Join(ids, ", ")).on(name, "")
	}
	for _, info := range running {
		if _, err := task.Cancel(ctx, s.opts.Client, name, info.ID); err != nil {
			return out, "", err
		}
		s.tasks.forget(name, info.ID, info.Run)
		out.CancelledTasks = append(out.CancelledTasks, info.ID)
	}
	err = s.markAndAct(ctx, name, stateStopping, func(v mcpView) *Refusal {
		if v.holdingFor(s.opts.Session) != heldHere {
			return takenElsewhere(name)
		}
		return nil
	}, func() error {
		return s.opts.Client.StopInstance(ctx, name, incus.StopOptions{Force: true, Timeout: stopTimeout})
	})
	// The mark is lifted whether or not the stop worked.
	if _, clearErr := s.update(context.WithoutCancel(ctx), name, func(v mcpView) (map[string]string, error) {
		if v.state != stateStopping {
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
	v, _, refusal := s.held(ctx, name)
	if refusal != nil {
		return StartInstanceResult{}, "", refusal
	}
	if !v.inst.Running() {
		if err := s.opts.Client.StartInstance(ctx, name); err != nil {
			return StartInstanceResult{}, "", err
		}
	}
	deadline := s.opts.Clock.Now().Add(time.Minute)
	for !s.answers(ctx, name) {
		if s.opts.Clock.Now().After(deadline) {
			return StartInstanceResult{}, "", refusef(CodeUnavailable, "instance %s started but does not answer", name).on(name, "")
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
