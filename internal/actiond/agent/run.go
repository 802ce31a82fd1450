// Package agent runs callable agents: one attempt of a task's loop, model
// exchange after model exchange, each tool the model asks for called
// through the engine's call path under the same authority a server's calls
// have — the principal's policies, then the server's, then the agent's own,
// read again before every exchange and every call — and every exchange and
// call recorded beneath the task as it happens. Its writes are held in one
// unit of work that the task's worker commits with its SUCCEEDED record, or
// drops. The model's providers speak their own wire formats (anthropic.go,
// openai.go); which provider answers where, with which key, is actiond's
// configuration (providers.go). Scheduling, retries and recovery are
// package tasks'.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Codes of an attempt that stopped.
const (
	// CodePrincipalRevoked: the principal that started the task is gone,
	// or may no longer invoke the server.
	CodePrincipalRevoked = "principal_revoked"
	// CodeCredentialExpired: the token the task was started with expired.
	CodeCredentialExpired = "credential_expired"
	// CodeServerGone: the server the task was started through was deleted.
	CodeServerGone = "mcp_server_not_found"
	// CodeTurnLimit: the model was still calling tools after maxTurns.
	CodeTurnLimit = "agent_turn_limit"
	// CodeAnswerTruncated: the model's answer stopped at maxTokens.
	CodeAnswerTruncated = "agent_answer_truncated"
	// CodeModelRefused: the model refused to answer.
	CodeModelRefused = "model_refused"
	// CodeRecordFailed: an attempt could not record what it did.
	CodeRecordFailed = "task_record_failed"
	// CodeTranscriptTooLarge: the conversation grew past maxTranscriptBytes.
	CodeTranscriptTooLarge = "agent_transcript_too_large"
)

// What a conversation holds: each tool result is cut to
// maxToolResultBytes for the model (the call's record keeps it whole),
// and the conversation, sent again at every turn, to maxTranscriptBytes.
const (
	maxToolResultBytes = 1 << 20
	maxTranscriptBytes = 48 << 20
)

// forModel cuts a tool result to what the model is sent.
func forModel(content string) string {
	if len(content) <= maxToolResultBytes {
		return content
	}
	cut := maxToolResultBytes
	for cut > 0 && !utf8.RuneStart(content[cut]) {
		cut--
	}
	return content[:cut] + fmt.Sprintf("\n… (cut: the result is %d bytes; the first %d are shown)", len(content), cut)
}

// transcriptBytes is about what the conversation takes.
func transcriptBytes(messages []Message) int {
	n := 0
	for _, m := range messages {
		for _, b := range m.Content {
			n += len(b.Text) + len(b.Content) + len(b.Input) + len(b.Name) + len(b.ID) + 32
		}
	}
	return n
}

// Spec is what a task's start records for the worker that runs it.
type Spec struct {
	Account      string           `json:"account"`
	Server       engine.ServerRef `json:"server"`
	SessionID    string           `json:"sessionId"`
	AgentID      string           `json:"agentId"`
	AgentVersion int              `json:"agentVersion"`
	Input        map[string]any   `json:"input"`
	Who          Who              `json:"who"`
	StartedBy    string           `json:"startedBy"`
	Preview      bool             `json:"preview"`
	// Draft is, for an invoke of an unpublished definition, that
	// definition with its references resolved: it runs instead of the
	// stored version, and each of its tools in Through goes through the
	// server's reference of that name.
	Draft   json.RawMessage           `json:"draft,omitempty"`
	Through map[string]engine.Through `json:"through,omitempty"`
}

// Who is the identity a task runs as: what the verified token said when the
// task started. The token itself is never kept.
type Who struct {
	Principal string         `json:"principal"`
	Subject   string         `json:"subject"`
	Client    string         `json:"client"`
	Claims    map[string]any `json:"claims,omitempty"`
	ExpiresAt time.Time      `json:"expiresAt,omitzero"`
}

// SpecOf is the spec of a start.
func SpecOf(start engine.TaskStart) Spec {
	who := Who{}
	if start.Who != nil {
		who = Who{Principal: start.Who.Principal, Subject: start.Who.Subject, Client: start.Who.Client, Claims: start.Who.Claims, ExpiresAt: start.Who.ExpiresAt}
	}
	return Spec{
		Account: start.Scope.Account, Server: start.Server, SessionID: start.Scope.SessionID,
		AgentID: start.Agent.ID, AgentVersion: start.Agent.Version, Input: start.Input,
		Who: who, StartedBy: start.StartedBy, Preview: start.Preview, Draft: start.Draft, Through: start.Through,
	}
}

func (w Who) identity() *auth.Identity {
	return &auth.Identity{Principal: w.Principal, Subject: w.Subject, Client: w.Client, Claims: w.Claims, ExpiresAt: w.ExpiresAt}
}

// Registry reads what an attempt runs and under whom, as it stands now.
type Registry interface {
	Resolver(account string) action.Resolver
	Principal(ctx context.Context, account, name string) (policies []policy.Policy, found bool, err error)
	Action(ctx context.Context, account, id string, version int) (action.Target, error)
}

// Runner runs attempts.
type Runner struct {
	Store    *store.Store
	Engine   *engine.Runner
	Registry Registry
	Compiled *action.Cache
	Models   *Providers
	IDs      engine.IDs
	Clock    clock.Clock
}

// Attempt is one claimed attempt of a task.
type Attempt struct {
	TaskID string
	Spec   Spec
	// Record commits executions beneath the task as soon as they end, as
	// long as the attempt still holds the task; its error stops the attempt.
	Record func(ctx context.Context, executions []*store.Execution) error
}

// Result is how an attempt ended.
type Result struct {
	// Output is the agent's answer when it succeeded.
	Output any
	// Failure is why it failed; Retryable says whether another attempt
	// may succeed.
	Failure   *engine.Failure
	Retryable bool
	// Interrupted: the attempt's context ended (a cancellation, a shutdown,
	// a lost claim) or it could not record what it did; the caller knows
	// which, and Err says so.
	Interrupted bool
	Err         error
	// Work holds the agent's writes, to apply with its SUCCEEDED record.
	Work *store.Work
	// Recorded are the executions the attempt ended with, not yet recorded:
	// the model exchange that gave the final answer, which the task's end
	// records in its own transaction, as the exchange ends.
	Recorded []*store.Execution
}

// Run runs one attempt to its end.
func (r *Runner) Run(ctx context.Context, a Attempt) Result {
	run, failure := r.prepare(ctx, a)
	if failure != nil {
		return Result{Failure: failure, Retryable: failure.Code == engine.CodeFailure}
	}
	attemptCtx, cancel := context.WithTimeout(ctx, run.definition.AttemptTimeout())
	defer cancel()
	res := run.loop(attemptCtx)
	switch {
	case errors.Is(res.Err, store.ErrLeaseLost):
		return res
	case ctx.Err() != nil:
		return Result{Interrupted: true, Err: context.Cause(ctx), Recorded: res.Recorded}
	case attemptCtx.Err() != nil && (res.Interrupted || res.Failure == nil || res.Failure.Code == engine.CodeTimeout):
		// The attempt passed its response timeout, wherever it was.
		res = Result{Failure: timeoutFailure(run.definition), Recorded: res.Recorded}
	}
	res.Work = run.work
	return res
}

func timeoutFailure(def action.Definition) *engine.Failure {
	return engine.NewFailure(engine.CodeTimeout, "The agent passed its response timeout.",
		"Give the agent less to do, or ask its owner to raise its execution.responseTimeout.").
		WithDetail(map[string]any{"responseTimeoutSeconds": int(def.AttemptTimeout().Seconds())})
}

// run is one attempt's state.
type run struct {
	r          *Runner
	attempt    Attempt
	spec       Spec
	target     action.Target
	definition action.Definition
	compiled   *action.Compiled
	block      action.AgentBlock
	model      Model
	tools      []tool
	skills     []skill
	// loader is the load_skill tool, when a skill is not preloaded.
	loader *ToolSpec
	work   *store.Work
	who    *auth.Identity
	// layers are the authority last read, at generation: the principal,
	// the server and the agent are registry rows, so while the generation
	// stays where it was they are what was read.
	layers     []policy.Layer
	generation int64
}

// skill is one of the agent's skills, resolved: a preloaded one's
// instructions join the system prompt; the others are named with their
// descriptions.
type skill struct {
	target  action.Target
	preload bool
}

// tool is one tool the model may use: the agent's reference, resolved.
type tool struct {
	spec     ToolSpec
	ref      int
	target   action.Target
	compiled *action.Compiled
	// fixed is what the server's reference sets, for a draft's tool that
	// goes through it; its values replace the agent's own.
	fixed map[string]any
}

func (r *Runner) prepare(ctx context.Context, a Attempt) (*run, *engine.Failure) {
	spec := a.Spec
	target, err := r.Registry.Action(ctx, spec.Account, spec.AgentID, spec.AgentVersion)
	if errors.Is(err, action.ErrNotFound) {
		return nil, engine.NewFailure(engine.CodeNotRunnable, "The task's agent no longer exists.", "Start the task again with an agent the server offers.")
	}
	if err != nil {
		return nil, storeFailure(err)
	}
	compile := func() (*action.Compiled, error) { return r.Compiled.Get(target.ID, target.Version, target.Definition) }
	if spec.Draft != nil {
		// A draft is compiled on its own: the cache holds stored versions.
		if target.Definition, err = action.Decode(spec.Draft); err != nil {
			return nil, engine.NewFailure(engine.CodeNotRunnable, "The draft the task runs cannot be read: "+err.Error(), "Invoke the draft again.")
		}
		compile = func() (*action.Compiled, error) { return action.Compile(target.Definition) }
	}
	def := target.Definition
	if !def.IsCallableAgent() {
		return nil, engine.NewFailure(engine.CodeNotRunnable, "The task's action is not a callable agent.", "Start a callable agent.")
	}
	block, err := def.AgentSettings()
	if err != nil {
		return nil, engine.NewFailure(engine.CodeNotRunnable, "The agent's definition cannot run: "+err.Error(), "Ask the agent's owner to fix its agent block.")
	}
	compiled, err := compile()
	if err != nil {
		return nil, engine.NewFailure(engine.CodeNotRunnable, "The agent's definition cannot run: "+err.Error(), "Ask the agent's owner to fix its definition.")
	}
	model, err := r.Models.Model(block.Model.Provider)
	if err != nil {
		return nil, modelFailure(err)
	}
	x := &run{r: r, attempt: a, spec: spec, target: target, definition: def, compiled: compiled, block: block, model: model,
		work: r.Store.NewWork(spec.Account), who: spec.Who.identity()}
	if x.tools, err = r.resolveTools(ctx, spec.Account, def, spec.Through); err != nil {
		return nil, storeFailure(err)
	}
	if x.skills, err = r.resolveSkills(ctx, spec.Account, def); err != nil {
		return nil, storeFailure(err)
	}
	if loader, ok := skillLoader(x.skills, x.tools); ok {
		x.loader = &loader
	}
	return x, nil
}

// resolveSkills resolves the agent's skill references at their pinned or
// latest versions, leaving out what no longer resolves to an enabled skill.
func (r *Runner) resolveSkills(ctx context.Context, account string, def action.Definition) ([]skill, error) {
	resolver := r.Registry.Resolver(account)
	var out []skill
	for _, ref := range def.Skills {
		target, ok, err := action.ResolveSkill(ctx, resolver, ref)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, skill{target: target, preload: ref.Preload != nil && *ref.Preload})
		}
	}
	return out, nil
}

// modelToolName is a name every provider takes: ^[a-zA-Z0-9_-]{1,64}$.
var unsafeToolName = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// resolveTools resolves the agent's tool references at their pinned or latest
// versions. What cannot be called from a loop is left out: a reference that
// no longer resolves to something enabled, a callable agent (it runs only as
// a task) and the natives only a server's requests run.
func (r *Runner) resolveTools(ctx context.Context, account string, def action.Definition, through map[string]engine.Through) ([]tool, error) {
	resolver := r.Registry.Resolver(account)
	var out []tool
	seen := map[string]bool{}
	for i, ref := range def.Tools {
		version := 0
		if ref.Version != nil {
			version = *ref.Version
		}
		listed, isListed := through[ref.Name]
		if isListed {
			version = listed.Version
		}
		target, err := action.ResolveTool(ctx, resolver, ref.Name, version)
		if errors.Is(err, action.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if target.Deleted || !target.Enabled || !action.Callable(target) || target.Definition.IsCallableAgent() {
			continue
		}
		t := tool{ref: i, target: target}
		if isListed {
			t.fixed = listed.Fixed
		}
		var schema map[string]any
		if target.Native {
			native, ok := engine.Native(target.Definition.Name)
			if !ok || action.MCPOnly(target.Definition.Name) {
				continue
			}
			t.spec.Description = native.Description()
			schema = mcpkit.SchemaMap(native.InputSchema())
		} else {
			if t.compiled, err = r.Compiled.Get(target.ID, target.Version, target.Definition); err != nil {
				return nil, err
			}
			t.spec.Description = target.Definition.Description
			schema = action.InputSchema(target)
		}
		t.spec.InputSchema = action.EffectiveInputSchema(schema, ref, action.IntentNone)
		name := unsafeToolName.ReplaceAllString(action.VisibleName(target), "_")
		if len(name) > 64 {
			name = name[:64]
		}
		for base, n := name, 2; seen[name]; n++ {
			name = fmt.Sprintf("%.60s_%d", base, n)
		}
		seen[name] = true
		t.spec.Name = name
		out = append(out, t)
	}
	return out, nil
}

func (x *run) loop(ctx context.Context) Result {
	if res, stop := x.recordLoads(ctx); stop {
		return res
	}
	transcript := []Message{{Role: "user", Content: []Block{{Type: BlockText, Text: inputText(x.spec.Input)}}}}
	specs := make([]ToolSpec, len(x.tools))
	for i, t := range x.tools {
		specs[i] = t.spec
	}
	if x.loader != nil {
		specs = append(specs, *x.loader)
	}
	sent := 0
	for turn := 1; turn <= x.block.MaxTurns; turn++ {
		if res, stop := x.checkpoint(ctx); stop {
			return res
		}
		req := Request{Model: x.block.Model.Name, System: x.system(), Messages: transcript, Tools: specs, MaxTokens: x.block.MaxTokens}
		started := x.r.Clock.Now()
		resp, err := x.model.Exchange(ctx, req)
		exchange := x.exchangeRecord(ctx, turn, req, transcript[sent:], resp, err, started)
		if err == nil && !usesTools(resp) {
			// The final answer: the exchange is recorded with the task's end.
			res := x.answer(resp)
			res.Recorded = []*store.Execution{exchange}
			return res
		}
		if err := x.attempt.Record(context.WithoutCancel(ctx), []*store.Execution{exchange}); err != nil {
			return Result{Interrupted: true, Err: err}
		}
		sent = len(transcript)
		if err != nil {
			if ctx.Err() != nil {
				return Result{Interrupted: true}
			}
			f := modelFailure(err)
			var merr *ModelError
			return Result{Failure: f, Retryable: errors.As(err, &merr) && merr.Retryable}
		}
		transcript = append(transcript, Message{Role: "assistant", Content: resp.Content})
		var uses []Block
		for _, b := range resp.Content {
			if b.Type == BlockToolUse {
				uses = append(uses, b)
			}
		}
		results := make([]Block, 0, len(uses))
		for _, use := range uses {
			if res, stop := x.checkpoint(ctx); stop {
				return res
			}
			block, res, stop := x.call(ctx, use)
			if stop {
				return res
			}
			results = append(results, block)
		}
		transcript = append(transcript, Message{Role: "user", Content: results})
		if n := transcriptBytes(transcript); n > maxTranscriptBytes {
			return Result{Failure: engine.NewFailure(CodeTranscriptTooLarge, fmt.Sprintf("The agent's conversation grew to %d bytes, past the %d it may hold.", n, maxTranscriptBytes),
				"Give the agent tools that answer less, or less to do in one task.")}
		}
	}
	return Result{Failure: engine.NewFailure(CodeTurnLimit, fmt.Sprintf("The agent was still calling tools after %d model exchanges.", x.block.MaxTurns),
		"Give the agent less to do, or ask its owner to raise agent.maxTurns.")}
}

// checkpoint is what every step waits for: the attempt's context, and the
// authority the next invocation runs under, read again now.
func (x *run) checkpoint(ctx context.Context) (Result, bool) {
	if ctx.Err() != nil {
		return Result{Interrupted: true}, true
	}
	if _, failure := x.authority(ctx); failure != nil {
		if ctx.Err() != nil {
			return Result{Interrupted: true}, true
		}
		return Result{Failure: failure, Retryable: failure.Code == engine.CodeFailure}, true
	}
	return Result{}, false
}

// authority is the policy layers of the next invocation: the principal's
// policies as they stand now, then the server's current ones, then the
// agent's own. A principal that is gone, may no longer invoke the server,
// or whose credential expired, stops the attempt.
func (x *run) authority(ctx context.Context) ([]policy.Layer, *engine.Failure) {
	spec := x.spec
	if !spec.Who.ExpiresAt.IsZero() && !x.r.Clock.Now().Before(spec.Who.ExpiresAt) {
		return nil, engine.NewFailure(CodeCredentialExpired, "The credential the task was started with expired, so the agent stopped.",
			"Sign in again and start the task again.")
	}
	generation, err := x.r.Store.Generation(ctx, spec.Account)
	if err != nil {
		return nil, storeFailure(err)
	}
	if x.layers != nil && generation == x.generation {
		return x.layers, nil
	}
	policies, found, err := x.r.Registry.Principal(ctx, spec.Account, spec.Who.Principal)
	if err != nil {
		return nil, storeFailure(err)
	}
	revoked := engine.NewFailure(CodePrincipalRevoked, "The principal that started the task may no longer invoke this server, so the agent stopped.",
		"Ask an administrator for INVOKE on the server, then start the task again.")
	if !found {
		return nil, revoked
	}
	principal := policy.Layer{Name: policy.LayerPrincipal, Policies: policies, PrincipalID: spec.Who.Principal}
	server, err := x.r.Registry.Action(ctx, spec.Account, spec.Server.ID, 0)
	if errors.Is(err, action.ErrNotFound) || err == nil && server.Deleted {
		return nil, engine.NewFailure(CodeServerGone, "The MCP server the task was started through was deleted, so the agent stopped.",
			"Start the task again through a server that offers the agent.")
	}
	if err != nil {
		return nil, storeFailure(err)
	}
	invoke := policy.Request{Operation: policy.Invoke, Resource: action.ResourceAction, Claims: spec.Who.Claims, Document: action.Document(server)}
	if policy.Check(ctx, invoke, principal) != nil {
		return nil, revoked
	}
	layers := []policy.Layer{principal}
	if p := server.Definition.Policies; len(p) > 0 {
		layers = append(layers, policy.Layer{Name: policy.LayerServer, Policies: p, ActionID: server.ID})
	}
	if p := x.definition.Policies; len(p) > 0 {
		layers = append(layers, policy.Layer{Name: policy.LayerAgent, Policies: p, ActionID: x.target.ID})
	}
	x.layers, x.generation = layers, generation
	return layers, nil
}

// system is the agent's instructions, its skills, and what its answer
// must be.
func (x *run) system() string {
	system := x.block.Instructions
	for _, sk := range x.skills {
		def := sk.target.Definition
		system += "\n\n## Skill " + def.Name + "\n" + def.Description
		instructions, ok := def.Config["instructions"].(string)
		switch {
		case ok && sk.preload:
			system += "\n\n" + instructions
		case !sk.preload && x.loader != nil:
			system += "\n\nLoad its instructions with " + x.loader.Name + " when it applies."
		}
	}
	if block := x.definition.Tool; block != nil && block.OutputSchema != nil {
		schema, _ := json.Marshal(block.OutputSchema)
		system += "\n\nAnswer with one JSON value, and nothing else, that matches this JSON Schema: " + string(schema)
	}
	return system
}

func inputText(input map[string]any) string {
	b, _ := json.Marshal(input)
	return "Input:\n" + string(b)
}

// call runs one tool use through the engine, beneath the task, and returns
// what the model is told.
func (x *run) call(ctx context.Context, use Block) (Block, Result, bool) {
	result := func(content string, isError bool) Block {
		return Block{Type: BlockToolResult, ToolUseID: use.ID, Content: forModel(content), IsError: isError}
	}
	if x.loader != nil && use.Name == x.loader.Name {
		return x.loadSkill(ctx, use)
	}
	var t *tool
	for i := range x.tools {
		if x.tools[i].spec.Name == use.Name {
			t = &x.tools[i]
		}
	}
	if t == nil {
		return result(fmt.Sprintf("There is no tool named %q: use one of the tools offered.", use.Name), true), Result{}, false
	}
	var args map[string]any
	if err := json.Unmarshal(use.Input, &args); err != nil || args == nil {
		return result("The tool's input must be a JSON object.", true), Result{}, false
	}
	approval := x.definition.Tools[t.ref].Approval
	needsApproval := approval != nil && approval.Required
	if needsApproval && !x.spec.Preview {
		return result(CodeApprovalRequired+": "+approvalRefusal, true), Result{}, false
	}
	layers, failure := x.authority(ctx)
	if failure != nil {
		return Block{}, Result{Failure: failure, Retryable: failure.Code == engine.CodeFailure}, true
	}
	scope := action.Scope{Request: x.spec.Input, Event: map[string]any{"data": x.spec.Input}}
	effective, err := x.compiled.ApplyFixedInput(ctx, t.ref, scope, args)
	if err != nil {
		return result("The agent's fixed input for this tool could not be evaluated; ask the agent's owner to fix it.", true), Result{}, false
	}
	if t.fixed != nil {
		effective = action.MergeFixed(effective, t.fixed)
	}
	out := x.r.Engine.Call(ctx, &engine.Call{
		Account: x.spec.Account, Who: x.who, Layers: layers, Target: t.target, Compiled: t.compiled, Input: effective,
		ParentID: x.attempt.TaskID, Work: x.work, Preview: x.spec.Preview, Server: x.spec.Server, SessionID: x.spec.SessionID,
	})
	if needsApproval {
		grantedInPreview(out.Recorded, out.ExecutionID)
	}
	if err := x.attempt.Record(ctx, out.Recorded); err != nil {
		return Block{}, Result{Interrupted: true, Err: err}, true
	}
	if ctx.Err() != nil {
		return Block{}, Result{Interrupted: true}, true
	}
	if out.Failure != nil {
		text := out.Failure.Code + ": " + out.Failure.Message
		if out.Failure.Hint != "" {
			text += "\nHint: " + out.Failure.Hint
		}
		return result(text, true), Result{}, false
	}
	return result(outputText(out.Output), false), Result{}, false
}

// CodeApprovalRequired refuses a live call of a tool the agent's reference
// says needs a person's approval. actiond has no way to ask a person, so
// it refuses rather than run the call unapproved.
const CodeApprovalRequired = "action_approval_required"

const approvalRefusal = "This tool needs a person's approval for each call, and actiond cannot ask for one, so the call did not run. " +
	"Carry on without it, or say in your answer what you would have called."

// grantedInPreview marks the execution of a call that requires approval,
// run in a preview as if approved (ACT-451): its invocation says so.
func grantedInPreview(recorded []*store.Execution, id string) {
	for _, e := range recorded {
		if e.ID == id {
			store.MarkGrantedInPreview(e)
		}
	}
}

func outputText(output any) string {
	if s, ok := output.(string); ok {
		return s
	}
	b, _ := json.Marshal(output)
	return string(b)
}

// recordLoads records each preloaded skill's load beneath the task: the
// exact version whose instructions the agent received.
func (x *run) recordLoads(ctx context.Context) (Result, bool) {
	var loads []*store.Execution
	for _, sk := range x.skills {
		if sk.preload {
			loads = append(loads, x.loadRecord(sk))
		}
	}
	if err := x.attempt.Record(ctx, loads); err != nil {
		return Result{Interrupted: true, Err: err}, true
	}
	return Result{}, false
}

// usesTools says whether the model's answer asks for tools, so that the
// loop goes on.
func usesTools(resp *Response) bool {
	for _, b := range resp.Content {
		if b.Type == BlockToolUse {
			return true
		}
	}
	return false
}

// exchangeRecord is the record of one model exchange beneath the task:
// what was added to the conversation since the previous exchange, and the
// answer.
func (x *run) exchangeRecord(ctx context.Context, turn int, req Request, added []Message, resp *Response, failure error, started time.Time) *store.Execution {
	input := map[string]any{"provider": x.block.Model.Provider, "model": req.Model, "turn": turn, "messages": added}
	if turn == 1 {
		names := make([]string, len(req.Tools))
		for i, t := range req.Tools {
			names[i] = t.Name
		}
		input["system"], input["tools"] = req.System, names
	}
	e := &store.Execution{
		ID: x.r.IDs.New(), Account: x.spec.Account, ActionID: "model:" + x.block.Model.Provider + "/" + req.Model,
		ActionName: req.Model, EventType: "model.exchange", Role: store.RoleCall, ParentID: x.attempt.TaskID,
		Status: store.Succeeded, Caller: x.spec.Who.Principal, Subject: x.spec.Who.Subject, Client: x.spec.Who.Client,
		Preview: x.spec.Preview, StartedAt: started, EndedAt: x.r.Clock.Now(),
	}
	e.Input, _ = json.Marshal(input)
	if failure != nil {
		f := modelFailure(failure)
		if ctx.Err() != nil {
			f = engine.NewFailure(engine.CodeFailure, "The exchange was interrupted.", "Nothing to do: the task's record says why it stopped.")
		}
		e.Status = store.Failed
		e.Error, _ = json.Marshal(map[string]any{"code": f.Code, "message": f.Message, "hint": f.Hint, "detail": failure.Error()})
	} else {
		e.Output, _ = json.Marshal(resp)
	}
	return e
}

// answer is the agent's final answer: the model's text, or for an agent
// with an outputSchema the JSON value it must be.
func (x *run) answer(resp *Response) Result {
	switch resp.StopReason {
	case StopMaxTokens:
		return Result{Failure: engine.NewFailure(CodeAnswerTruncated, "The model's answer stopped at the agent's maxTokens.",
			"Ask for a shorter answer, or ask the agent's owner to raise agent.maxTokens.")}
	case StopRefusal:
		return Result{Failure: engine.NewFailure(CodeModelRefused, "The model refused to answer.", "Change what you ask the agent for.")}
	}
	var parts []string
	for _, b := range resp.Content {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	text := strings.TrimSpace(strings.Join(parts, "\n"))
	block := x.definition.Tool
	if block == nil || block.OutputSchema == nil {
		return Result{Output: text}
	}
	var value any = text
	if parsed, ok := parseJSON(text); ok {
		value = parsed
	}
	if err := x.compiled.ValidateOutput(value); err != nil {
		return Result{Failure: engine.NewFailure(engine.CodeOutputInvalid, "The agent's answer does not match its outputSchema.",
			"Ask the agent's owner to make its instructions ask for the answer its outputSchema describes.").WithDetail(err.Error())}
	}
	return Result{Output: value}
}

// parseJSON reads an answer that is JSON, also inside a ``` fence.
func parseJSON(text string) (any, bool) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "```") {
		text = strings.TrimPrefix(text, "```json")
		text = strings.TrimPrefix(text, "```")
		text = strings.TrimSuffix(strings.TrimSpace(text), "```")
	}
	var value any
	if err := json.Unmarshal([]byte(text), &value); err != nil {
		return nil, false
	}
	return value, true
}

func modelFailure(err error) *engine.Failure {
	var merr *ModelError
	if errors.As(err, &merr) {
		return engine.NewFailure(merr.Code, merr.Message, merr.Hint).WithDetail(err.Error())
	}
	return engine.NewFailure(CodeModelUnavailable, "The model exchange failed.", "The task retries when its execution settings allow.").WithDetail(err.Error())
}

// storeFailure is a read of the registry that failed: the database may be
// back for another attempt.
func storeFailure(err error) *engine.Failure {
	return engine.NewFailure(engine.CodeFailure, "The agent could not read what it runs under.", "The task retries when its execution settings allow.").WithDetail(err.Error())
}
