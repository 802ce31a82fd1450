package mcpserver

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/isx/config"
	"github.com/incusspawn/isx/internal/isx/delegate"
	"github.com/incusspawn/isx/internal/isx/holding"
	"github.com/incusspawn/isx/internal/isx/incus"
	"github.com/incusspawn/isx/internal/isx/instance"
	"github.com/incusspawn/isx/internal/isx/task"
	"github.com/incusspawn/isx/internal/mcpkit"
)

func (s *Server) addDelegateTools() {
	addTool(s, delegateTool, s.delegate)
	addTool(s, sendMessageTool, s.sendMessage)
}

// maxInstruction bounds an instruction or a follow-up: it travels to the
// agent as one argument of its command line.
const maxInstruction = 48 << 10

// DelegateArgs are delegate's arguments.
type DelegateArgs struct {
	Instruction    string          `json:"instruction" jsonschema:"the whole task for the agent, as you would write it to a colleague (at most 48 KiB)" minLength:"1" maxLength:"49152"`
	Instance       InstanceName    `json:"instance,omitempty" jsonschema:"a running instance this session holds; give this or template"`
	Template       string          `json:"template,omitempty" jsonschema:"an approved, built template: the agent gets a fresh instance of it"`
	Agent          string          `json:"agent,omitempty" jsonschema:"claude, codex, pi or opencode; default claude when installed, else codex" enum:"claude|codex|pi|opencode"`
	Model          string          `json:"model,omitempty" jsonschema:"a model for this task instead of the template's; it stays for follow-ups" pattern:"^[A-Za-z0-9][A-Za-z0-9._:/@\\[\\]-]{0,127}$"`
	Cwd            string          `json:"cwd,omitempty" jsonschema:"absolute directory the agent works in (default: the tool's workdir, else /home/agent)"`
	Purpose        string          `json:"purpose,omitempty" jsonschema:"one line, at most 200 characters, for a fresh instance (isx list shows it)" maxLength:"200"`
	NameHint       string          `json:"name_hint,omitempty" jsonschema:"1-16 of a-z, 0-9 and '-' for a fresh instance: mcp-<template>-<hint>-<suffix> (default hint: task)" pattern:"^[a-z0-9-]{1,16}$"`
	IdempotencyKey *IdempotencyKey `json:"idempotency_key,omitempty" jsonschema:"1-64 of A-Za-z0-9._:-; a repeat returns the task the key made, with replayed: true"`
}

// Validate checks what the schema cannot say.
func (a *DelegateArgs) Validate() error {
	switch {
	case a.Template == "" && a.Instance == "":
		return invalid("give instance (one this session holds) or template (for a fresh instance)")
	case a.Template != "" && a.Instance != "":
		return invalid("give instance or template, not both")
	case a.Instance != "" && (a.Purpose != "" || a.NameHint != ""):
		return invalid("purpose and name_hint describe a fresh instance: give them with template, not instance")
	case strings.ContainsRune(a.Instruction, 0):
		return invalid("instruction holds a NUL byte")
	case strings.TrimSpace(a.Instruction) == "":
		return invalid("instruction is empty")
	case len(a.Instruction) > maxInstruction:
		return invalid("instruction is %d bytes; at most %d are accepted: put long material in a file in the instance and point the agent at it", len(a.Instruction), maxInstruction)
	}
	if err := task.CheckCwd(a.Cwd); err != nil {
		return err
	}
	return checkPurpose(a.Purpose)
}

// DelegateResult is delegate's structured result.
type DelegateResult struct {
	Instance    string    `json:"instance"`
	TaskID      string    `json:"task_id"`
	Kind        TaskKind  `json:"kind"`
	Agent       string    `json:"agent" jsonschema:"the agent that works on it"`
	Model       string    `json:"model,omitempty" jsonschema:"the model it was asked to use"`
	Run         int       `json:"run"`
	State       TaskState `json:"state"`
	Replayed    bool      `json:"replayed" jsonschema:"the key had already made this task: nothing new was started"`
	SessionID   string    `json:"session_id,omitempty" jsonschema:"the agent's session, once known"`
	JoinCommand string    `json:"join_command" jsonschema:"the exact command a person runs on the host to join the conversation"`
}

var delegateTool = newTool[DelegateArgs, DelegateResult](mcpkit.Spec{
	Name: "delegate", Annotations: acting(false),
	Description: "Hand a whole task to a coding agent (Claude Code, Codex, Pi or opencode) working inside an instance with full access there, as a task with its own id: in an instance this session holds, or in a fresh one of an approved template (name_hint default task). One working agent per instance. Follow it with task_status, wait_any or the task_changed notification; task_result gives its report, get_diff its changes, send_message continues the same conversation. No agent runs under a turn limit.",
})

// defaultDelegateHint names an instance delegate made without a name_hint.
const defaultDelegateHint = "task"

func (s *Server) delegate(ctx context.Context, c *call, args DelegateArgs) (DelegateResult, string, error) {
	key := keyOf(args.IdempotencyKey)
	defer s.keys.Lock("task:" + key)()
	name := string(args.Instance)
	if args.Template != "" {
		if !c.policy.Approves(args.Template) {
			return DelegateResult{}, "", notApproved(args.Template, c.policy.Path)
		}
		found, refusal := s.keyedInstance(ctx, key)
		if refusal != nil {
			return DelegateResult{}, "", refusal
		}
		if found == "" {
			hint := args.NameHint
			if hint == "" {
				hint = defaultDelegateHint
			}
			made, _, err := s.createInstance(ctx, c, CreateInstanceArgs{Template: args.Template, NameHint: hint, Purpose: args.Purpose, IdempotencyKey: args.IdempotencyKey})
			if err != nil {
				return DelegateResult{}, "", err
			}
			found = made.Instance
		}
		name = found
	}
	views, err := s.hold.Instances(ctx)
	if err != nil {
		return DelegateResult{}, "", err
	}
	repeat, _, err := s.hold.Repeat(ctx, views, name, key)
	if err != nil {
		return DelegateResult{}, "", err
	}
	v, _, err := s.hold.HeldRunning(ctx, name)
	if err != nil {
		return DelegateResult{}, "", err
	}
	tool, adapter, refusal := chooseAgent(v, args.Agent)
	if refusal != nil {
		return DelegateResult{}, "", refusal.On(aboutInstance, name)
	}
	permission, refusal := agentPermission(c.policy, v.Stamps.Template, adapter.Name())
	if refusal != nil {
		return DelegateResult{}, "", refusal.On(aboutInstance, name)
	}
	model := args.Model
	if model == "" {
		model = tool.Model
	}
	cwd := args.Cwd
	if cwd == "" {
		cwd = workdirOf(tool)
	}
	record := &task.Delegate{Agent: adapter.Name(), Model: args.Model, Permission: permission}
	if !repeat {
		// What must hold before the agent starts, read at once: no agent
		// already working there, the checkout's HEAD, the model.
		var (
			wg            sync.WaitGroup
			busy, baseErr error
			modelRefusal  *coded.Error
		)
		wg.Go(func() { busy = s.oneAgentAtATime(ctx, name) })
		wg.Go(func() { record.BaseCommit, baseErr = s.baseCommit(ctx, name, cwd) })
		if args.Model != "" && adapter.Name() == delegate.Claude {
			wg.Go(func() { modelRefusal = s.preflight(ctx, name, model) })
		}
		wg.Wait()
		switch {
		case busy != nil:
			return DelegateResult{}, "", busy
		case modelRefusal != nil:
			return DelegateResult{}, "", modelRefusal
		case baseErr != nil:
			return DelegateResult{}, "", baseErr
		}
	}
	release := func() {}
	if !repeat {
		release, err = s.hold.ReserveTask(ctx, views, c.policy.MaxConcurrentTasks)
		if err != nil {
			return DelegateResult{}, "", err
		}
		if key != "" {
			if err := s.hold.ReserveKey(ctx, name, key); err != nil {
				release()
				return DelegateResult{}, "", err
			}
		}
	}
	defer release()
	launch := delegate.Launch{Prompt: args.Instruction, Model: model, Permission: permission}
	if !repeat {
		if adapter.Name() == delegate.Claude {
			if launch.Session, err = delegate.NewSessionID(s.opts.Random); err != nil {
				return DelegateResult{}, "", err
			}
			record.Session = launch.Session
		}
	}
	started, err := task.NewStarter(s.opts.Clock, s.opts.Random).Start(ctx, s.opts.Client, name, task.Spec{
		Kind: task.KindDelegate, Command: delegate.Command(adapter, launch), Cwd: cwd,
		Key: key, Session: s.opts.Session, Delegate: record,
	})
	if err != nil {
		return DelegateResult{}, "", s.startFailed(ctx, name, key, repeat, err)
	}
	info := started.Status
	s.markRunning(ctx, name, info)
	s.observe(name, info)
	out := DelegateResult{
		Instance: name, TaskID: info.ID, Kind: KindDelegate, Agent: adapter.Name(), Model: model, Run: info.Run,
		State: TaskState(info.State), Replayed: started.Replayed, JoinCommand: task.JoinCommand(info.ID, name),
	}
	if rec := info.Record; rec != nil && rec.Delegate != nil {
		out.Agent, out.SessionID = rec.Delegate.Agent, rec.Delegate.Session
		if rec.Delegate.Model != "" {
			out.Model = rec.Delegate.Model
		}
	}
	text := fmt.Sprintf("Delegated task %s to %s in %s (%s). You will be told when it changes if you asked for task_changed; otherwise task_status with wait_seconds waits for it. task_result gives its report, get_diff its changes, send_message continues the conversation.", info.ID, out.Agent, name, info.State)
	if started.Replayed {
		text = fmt.Sprintf("Idempotency key %q had already made task %s in %s (replayed); it is %s. Nothing new was started.", key, info.ID, name, info.State)
	}
	return out, text, nil
}

// keyedInstance finds the instance in which key already made a task, so
// that a repeated delegate with a template goes back there.
func (s *Server) keyedInstance(ctx context.Context, key string) (string, error) {
	if key == "" {
		return "", nil
	}
	views, err := s.hold.Instances(ctx)
	if err != nil {
		return "", err
	}
	v, ok := holding.KeyedTask(views, key)
	if !ok {
		return "", nil
	}
	if v.HoldingFor(s.opts.Session) == holding.Orphaned {
		if _, _, err := s.hold.TakeOver(ctx, v.Inst.Name, false); err != nil {
			return "", err
		}
		s.adoptTasks(ctx, v)
	}
	return v.Inst.Name, nil
}

// chooseAgent picks the agent of a delegate among those the instance's
// template installed: the one asked for, else Claude, else Codex.
func chooseAgent(v holding.View, asked string) (instance.Tool, delegate.Adapter, *coded.Error) {
	tools := agentTools(v)
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.Name)
	}
	pick := asked
	if pick == "" {
		switch {
		case slices.Contains(names, delegate.Claude):
			pick = delegate.Claude
		case slices.Contains(names, delegate.Codex):
			pick = delegate.Codex
		default:
			return instance.Tool{}, nil, refusef(CodeWrongState, "instance %s (template %s) has neither Claude Code nor Codex installed (it has: %s); name an installed agent, or use a template whose tools install one", v.Inst.Name, v.Stamps.Template, listOrNone(names))
		}
	}
	for _, t := range tools {
		if t.Name == pick {
			adapter, err := delegate.Of(pick)
			if err != nil {
				return instance.Tool{}, nil, refusef(CodeInvalidArgument, "%v", err)
			}
			return t, adapter, nil
		}
	}
	return instance.Tool{}, nil, refusef(CodeInvalidArgument, "template %s of instance %s does not install %s (it has: %s); list_templates shows each template's delegate_agents", v.Stamps.Template, v.Inst.Name, pick, listOrNone(names))
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// agentTools are the agents the instance's template installed.
func agentTools(v holding.View) []instance.Tool {
	tools, err := v.Stamps.Tools()
	if err != nil {
		return nil
	}
	return tools
}

// hasAgent reports whether the instance has the named agent.
func hasAgent(v holding.View, name string) bool {
	return slices.ContainsFunc(agentTools(v), func(t instance.Tool) bool { return t.Name == name })
}

// agentPermission is the permission an agent runs with on a template:
// Claude's permission mode and Codex's sandbox mode from mcp.yaml; Pi and
// opencode always have full access.
func agentPermission(policy *config.MCP, tpl, agent string) (string, *coded.Error) {
	switch agent {
	case delegate.Claude:
		return policy.ClaudePermissionMode(tpl), nil
	case delegate.Codex:
		mode, err := policy.CodexSandboxMode(tpl)
		if err != nil {
			return "", refuseWith(CodeRefused, err, "Codex cannot run on template %s yet: %v; ask the user to add it to mcp.yaml", tpl, err)
		}
		return mode, nil
	}
	return "", nil
}

// workdirOf is where an agent works by default: its tool's workdir.
func workdirOf(tool instance.Tool) string {
	switch {
	case tool.Workdir == "":
		return task.AgentHome
	case strings.HasPrefix(tool.Workdir, "/"):
		return tool.Workdir
	}
	return task.AgentHome + "/" + tool.Workdir
}

// oneAgentAtATime refuses a delegate into an instance whose agent is
// still working: two agents would edit one checkout at once.
func (s *Server) oneAgentAtATime(ctx context.Context, name string) error {
	infos, err := task.List(ctx, s.opts.Client, name)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if info.Kind() == task.KindDelegate && info.State == task.StateRunning {
			s.observe(name, info)
			return refusef(CodeBusy, "an agent is already working in %s (task %s); wait for it, cancel_task it, or delegate into another instance", name, info.ID).On(aboutInstance, name).On(aboutTask, info.ID)
		}
	}
	return nil
}

// baseCommitScript prints HEAD of a directory's checkout, "-" for a
// checkout without commits, or nothing outside a checkout.
const baseCommitScript = `cd "$1" 2>/dev/null || { echo "no directory $1" >&2; exit 3; }
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || exit 0
git rev-parse --verify -q HEAD 2>/dev/null || echo -`

// baseCommit is what get_diff diffs the task's changes against.
func (s *Server) baseCommit(ctx context.Context, name, cwd string) (string, error) {
	res, err := s.opts.Client.Exec(ctx, name, incus.ExecRequest{
		Command: []string{"sh", "-c", baseCommitScript, "isx-base", cwd},
		Env:     agentEnv(nil), UID: task.AgentUID, GID: task.AgentGID, Cwd: task.AgentHome, Timeout: 30 * time.Second,
	})
	if err != nil {
		return "", execRefusal(name, err)
	}
	if res.ExitCode == 3 {
		return "", refusef(CodeInvalidArgument, "the working directory %s does not exist in %s, or the agent user cannot enter it", cwd, name).On(aboutInstance, name)
	}
	head := strings.TrimSpace(string(res.Stdout))
	if head != "" && head != "-" && !commitPattern.MatchString(head) {
		return "", refusef(CodeInternal, "instance %s named HEAD of %s in a form isx does not understand", name, cwd).On(aboutInstance, name)
	}
	return head, nil
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}([0-9a-f]{24})?$`)

// SendMessageArgs are send_message's arguments.
type SendMessageArgs struct {
	Instance InstanceName `json:"instance" jsonschema:"the instance the task runs in, held by this session"`
	TaskID   TaskID       `json:"task_id" jsonschema:"a delegate task that finished"`
	Message  string       `json:"message" jsonschema:"the follow-up for the agent, in the same conversation (at most 48 KiB)" minLength:"1" maxLength:"49152"`
}

// Validate checks what the schema cannot say.
func (a *SendMessageArgs) Validate() error {
	switch {
	case strings.ContainsRune(a.Message, 0):
		return invalid("message holds a NUL byte")
	case strings.TrimSpace(a.Message) == "":
		return invalid("message is empty")
	case len(a.Message) > maxInstruction:
		return invalid("message is %d bytes; at most %d are accepted", len(a.Message), maxInstruction)
	}
	return nil
}

var sendMessageTool = newTool[SendMessageArgs, DelegateResult](mcpkit.Spec{
	Name: "send_message", Annotations: acting(false),
	Description: "Continue a finished delegate task: the same agent resumes its exact saved conversation with this message, as a new run of the task (with the task's model). Refused while the task runs, while a person is in its conversation (attached), and before the agent has saved a session to resume.",
})

func (s *Server) sendMessage(ctx context.Context, c *call, args SendMessageArgs) (DelegateResult, string, error) {
	name, id := string(args.Instance), string(args.TaskID)
	v, _, err := s.hold.HeldRunning(ctx, name)
	if err != nil {
		return DelegateResult{}, "", on(err, "", id)
	}
	d, err := s.readDelegate(ctx, name, id, 64<<10, 0)
	if err != nil {
		return DelegateResult{}, "", err
	}
	info, rec := d.Run.Status, d.Record
	switch info.State {
	case task.StateLost:
		return DelegateResult{}, "", refusef(CodeNotFound, "instance %s has no record of task %s (it is lost)", name, id).On(aboutInstance, name).On(aboutTask, id)
	case task.StateRunning:
		return DelegateResult{}, "", refusef(CodeWrongState, "task %s is still running; wait for it (task_status with wait_seconds) before sending a message", id).On(aboutInstance, name).On(aboutTask, id)
	case task.StateAttached:
		return DelegateResult{}, "", refusef(CodeWrongState, "a person is in the conversation of task %s (isx shell --task); send_message waits until they leave it, so the two of you never race on one conversation", id).On(aboutInstance, name).On(aboutTask, id)
	}
	if rec == nil {
		return DelegateResult{}, "", refusef(CodeWrongState, "task %s is a command task; send_message continues delegate tasks only", id).On(aboutInstance, name).On(aboutTask, id)
	}
	adapter, err := delegate.Of(rec.Agent)
	if err != nil {
		return DelegateResult{}, "", refusef(CodeInternal, "task %s records an agent isx does not know: %v", id, err).On(aboutInstance, name).On(aboutTask, id)
	}
	if d.Session == "" {
		return DelegateResult{}, "", refusef(CodeWrongState, "%s has not saved a session for task %s yet, so there is no conversation to continue; delegate the follow-up as a new task", adapter.Name(), id).On(aboutInstance, name).On(aboutTask, id)
	}
	permission, refusal := agentPermission(c.policy, v.Stamps.Template, adapter.Name())
	if refusal != nil {
		return DelegateResult{}, "", refusal.On(aboutInstance, name).On(aboutTask, id)
	}
	model := rec.Model
	if model == "" {
		for _, t := range agentTools(v) {
			if t.Name == adapter.Name() {
				model = t.Model
			}
		}
	}
	views, err := s.hold.Instances(ctx)
	if err != nil {
		return DelegateResult{}, "", err
	}
	release, err := s.hold.ReserveTask(ctx, views, c.policy.MaxConcurrentTasks)
	if err != nil {
		return DelegateResult{}, "", err
	}
	defer release()
	launch := delegate.Launch{Prompt: args.Message, Model: model, Session: d.Session, Resume: true, Permission: permission}
	next, err := task.NewStarter(s.opts.Clock, s.opts.Random).NextRun(ctx, s.opts.Client, name, id, d.Run.Status.Record.Cwd, delegate.Command(adapter, launch))
	if err != nil {
		if coded.CodeOf(err) == task.CodeInternal {
			r := refusalOf(err)
			r.Code = CodeTaskFailed
			return DelegateResult{}, "", r
		}
		return DelegateResult{}, "", err
	}
	s.markRunning(ctx, name, *next)
	s.observe(name, *next)
	out := DelegateResult{
		Instance: name, TaskID: id, Kind: KindDelegate, Agent: adapter.Name(), Model: model, Run: next.Run,
		State: TaskState(next.State), SessionID: d.Session, JoinCommand: task.JoinCommand(id, name),
	}
	return out, fmt.Sprintf("Sent the message to %s; it resumes session %s as run %d of task %s in %s.", adapter.Name(), d.Session, next.Run, id, name), nil
}

// readDelegate is delegate.ReadTask, telling the user when a session
// could not be recorded.
func (s *Server) readDelegate(ctx context.Context, name, id string, head, tail int64) (*delegate.Read, error) {
	d, err := delegate.ReadTask(ctx, s.opts.Client, name, id, head, tail)
	if err == nil && d.Unrecorded != nil {
		s.warnf("recording the session of task %s: %v", id, d.Unrecorded)
	}
	return d, err
}
