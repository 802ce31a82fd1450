package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// Replay reruns a recorded request against a later version of its server
// or an unpublished definition: the same method handlers as the endpoint,
// on a server resolved for the replay, always in preview, in no session,
// with no admission and no completion. Its writes are dropped; its calls
// are recorded, rolled back by the replay, with their write sets.

// Replay is one recorded request to run again.
type Replay struct {
	Account string
	// Original is the request's execution; Calls the calls recorded
	// beneath it, whose versions unpinned references call again.
	Original *store.Execution
	Calls    []*store.Execution
	// Server is the server version to replay against, or the draft's
	// definition (Draft) with the server's ID and latest version.
	Server action.Target
	Draft  bool
	// Replayer is who replays; Root replays with no policy of its own.
	Replayer ReplayPrincipal
}

// ReplayPrincipal is the principal replaying, with the claims of its token
// and the layers its authority is (its principal's policies).
type ReplayPrincipal struct {
	Root                       bool
	Principal, Subject, Client string
	Claims                     map[string]any
	Layers                     []policy.Layer
}

// Codes of a replay that cannot run.
const (
	CodeReplayUnsupported = "replay_unsupported"
	CodeReplayDenied      = "ACCESS_DENIED"
)

// ReplayResult is the replay's record and its calls, for the caller to
// commit.
type ReplayResult struct {
	Execution *store.Execution
	Calls     []*store.Execution
}

// recordedRequest is what a request's execution input says.
type recordedRequest struct {
	ID              json.RawMessage `json:"id"`
	Method          string          `json:"method"`
	Params          json.RawMessage `json:"params"`
	Principal       string          `json:"principal"`
	Subject         string          `json:"subject"`
	Client          string          `json:"client"`
	ProtocolVersion string          `json:"protocolVersion"`
}

// Replay runs r and returns its record.
func (h *Handler) Replay(ctx context.Context, r Replay) (*ReplayResult, error) {
	d, ok := h.opts.Directory.(*directory)
	if !ok {
		return nil, errors.New("gateway: replay needs the registry's directory")
	}
	var original recordedRequest
	if err := json.Unmarshal(r.Original.Input, &original); err != nil || original.Method == "" {
		return nil, coded.New(CodeReplayUnsupported, "the execution's input is not a recorded MCP request")
	}
	server, err := d.replayServer(ctx, r)
	if err != nil {
		return nil, err
	}
	claims := originalClaims(r.Original, original)
	who := &auth.Identity{Principal: original.Principal, Subject: original.Subject, Client: original.Client, Claims: claims}
	if err := d.replayAuthority(ctx, r, server, who); err != nil {
		return nil, err
	}
	req := &rpcRequest{JSONRPC: "2.0", ID: original.ID, Method: original.Method, Params: original.Params, version: original.ProtocolVersion}
	json.Unmarshal(original.Params, &req.params)
	req.meta, _ = req.params["_meta"].(map[string]any)

	runCtx, cancel := context.WithTimeout(ctx, server.ResponseTimeout)
	defer cancel()
	ex := &exchange{
		h: h, account: r.Account, who: who, req: req, server: server, started: h.opts.Clock.Now(), ctx: runCtx,
		executionID: h.opts.IDs.New(),
		session:     store.SessionKey{Account: r.Account, ServerID: server.ActionID, ID: r.Original.SessionID},
	}
	ex.sessionInput = h.sessionInput(ctx, ex.session)
	ex.replayTasks = replayTasks{ex: ex, inner: h.opts.Tasks}
	result, callErr := h.replayMethod(runCtx, ex)
	if coded.CodeOf(callErr) == CodeReplayUnsupported {
		return nil, callErr // nothing ran: there is no replay to record
	}
	return ex.replayRecord(r, result, callErr), nil
}

// replayMethod runs the recorded method as the endpoint would.
func (h *Handler) replayMethod(ctx context.Context, ex *exchange) (mcp.Result, error) {
	method := ex.req.Method
	if !ex.server.serves(method, ex.req.version) {
		rerr := newError(codeMethodNotFound, errMethodNotFound, http.StatusNotFound, map[string]any{"method": method})
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	// The recorded params decode as they did when the endpoint served them;
	// ones that do not are refused as the endpoint would have.
	badParams := func() (mcp.Result, error) {
		rerr := newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, nil)
		ex.fail(rerr)
		return nil, rerr.jsonrpc()
	}
	decode := func(params any) bool {
		return json.Unmarshal(ex.req.Params, params) == nil
	}
	switch method {
	case "tools/list":
		return h.listTools(ctx, ex)
	case "tools/call":
		var params mcp.CallToolParamsRaw
		if !decode(&params) {
			return badParams()
		}
		// An agent it starts, directly or through invoke, is recorded as
		// not started (replayTasks).
		return h.callTool(ctx, ex, &params)
	case mcpkit.MethodGetTask, mcpkit.MethodUpdateTask, mcpkit.MethodCancelTask:
		var params mcpkit.TaskParams
		if json.Unmarshal(ex.req.Params, &params) != nil {
			return nil, h.taskNotFound(ex)
		}
		switch method {
		case mcpkit.MethodGetTask:
			return h.getTask(ex, params.TaskID)
		case mcpkit.MethodUpdateTask:
			return h.updateTask(ex, params.TaskID) // updates nothing, live or replayed
		}
		return h.cancelTask(ex, params.TaskID) // cancels nothing: replayTasks
	case "resources/list":
		return h.listResources(ex), nil
	case "resources/templates/list":
		return h.listTemplates(ex), nil
	case "resources/read":
		var params mcp.ReadResourceParams
		if !decode(&params) {
			return badParams()
		}
		return h.readResource(ctx, ex, &params)
	case "prompts/list":
		return h.listPrompts(ex), nil
	case "prompts/get":
		var params mcp.GetPromptParams
		if !decode(&params) {
			return badParams()
		}
		return h.getPrompt(ctx, ex, &params)
	case mcpkit.MethodListSkills:
		return listSkills(ex), nil
	case mcpkit.MethodGetSkill:
		var params mcpkit.GetSkillParams
		if !decode(&params) {
			return badParams()
		}
		s, rerr := h.loadSkill(ctx, ex, params.URI)
		if rerr != nil {
			return nil, rerr.jsonrpc()
		}
		return &mcpkit.GetSkillResult{ResultType: "complete", Skill: skillEntry(s)}, nil
	}
	return nil, coded.New(CodeReplayUnsupported, "a %s request cannot be replayed yet: only tools, resources, prompts, skills and tasks requests", method).
		WithHint("Replay a tools/call, resources/read, prompts/get, skills/get or tasks/* request, or a listing.")
}

// replayRecord is the replay's execution: what it answered, what it ran
// beneath it (rolled back by it), and what it replayed.
func (ex *exchange) replayRecord(r Replay, result mcp.Result, callErr error) *ReplayResult {
	now := ex.h.opts.Clock.Now()
	e := &store.Execution{
		ID: ex.executionID, Account: ex.account, ActionID: ex.server.ActionID, ActionVersion: ex.server.Version, ActionName: ex.server.Name,
		EventType: "mcp.replay", Role: store.RoleReplay, Status: store.Succeeded,
		Caller: r.Replayer.Principal, Subject: r.Replayer.Subject, Client: r.Replayer.Client,
		Input: r.Original.Input, Preview: true, StartedAt: ex.started, EndedAt: now,
	}
	var wire *jsonrpc.Error
	switch {
	case errors.As(callErr, &wire):
		e.Status = store.Failed
		e.Output, _ = json.Marshal(map[string]any{"error": wire})
		if ex.failure != nil {
			e.Error = ex.failure.recorded()
		}
	case callErr != nil:
		e.Status = store.Failed
		e.Error, _ = json.Marshal(map[string]any{"code": errInternal, "message": callErr.Error()})
	default:
		e.Output, _ = json.Marshal(ex.complete(result))
	}
	ex.mu.Lock()
	invocation := map[string]any{"replayOf": r.Original.ID, "draft": r.Draft, "serverVersion": ex.server.Version}
	for k, v := range ex.invocation {
		invocation[k] = v
	}
	calls := ex.calls
	ex.mu.Unlock()
	e.Invocation, _ = json.Marshal(invocation)
	for _, call := range calls {
		if call.Role != store.RoleTask { // a task not started ran nothing to roll back
			rollBack(call, e.ID)
		}
	}
	return &ReplayResult{Execution: e, Calls: calls}
}

// rollBack marks a call, and the calls beneath it, rolled back by the
// replay: none of their writes commit.
func rollBack(call *store.Execution, by string) {
	if call.RolledBackBy == "" {
		call.RolledBackBy = by
	}
	call.Preview = true
}

// originalClaims are the original request's token claims as it recorded
// them, or, for a record that kept none, what it recorded of who asked.
func originalClaims(e *store.Execution, original recordedRequest) map[string]any {
	var invocation struct {
		Claims map[string]any `json:"claims"`
	}
	if json.Unmarshal(e.Invocation, &invocation) == nil && invocation.Claims != nil {
		return invocation.Claims
	}
	return map[string]any{"principal": original.Principal, "sub": original.Subject, "client_id": original.Client}
}

// sessionInput reads the original session's input, which fixed input may
// read; nothing is written to the session.
func (h *Handler) sessionInput(ctx context.Context, key store.SessionKey) json.RawMessage {
	if key.ID == "" {
		return nil
	}
	var input json.RawMessage
	h.opts.Store.Read(ctx, func(tx *store.Tx) error {
		s, err := tx.Session(ctx, key)
		if err == nil {
			input = s.Input
		}
		return err
	})
	return input
}

// replayServer resolves the server to replay against: its references
// without a version call the versions the original request's calls ran.
func (d *directory) replayServer(ctx context.Context, r Replay) (*Server, error) {
	def := r.Server.Definition
	if def.Kind != action.KindMCP || def.MCP == nil {
		return nil, coded.New(CodeReplayUnsupported, "the replay's target is not an MCP server")
	}
	used := map[string]int{}
	for _, call := range r.Calls {
		if call.ActionID != "" && call.ActionVersion > 0 {
			used[call.ActionName] = int(call.ActionVersion)
		}
	}
	// A draft is compiled and resolved once per content: replaying the
	// recent requests against one draft resolves it once, not per request.
	id := r.Server.ID
	if r.Draft {
		body, _ := json.Marshal(def)
		sum := sha256.Sum256(body)
		id += "#draft:" + hex.EncodeToString(sum[:])
	}
	usedJSON, _ := json.Marshal(used) // map keys sorted
	key := replayKey{account: r.Account, id: id, version: r.Server.Version, used: string(usedJSON)}
	generation, err := d.store.Generation(ctx, r.Account)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	cached, ok := d.replays[key]
	d.mu.Unlock()
	if !ok || cached.generation != generation {
		compiled, err := d.compiled.Get(id, r.Server.Version, def)
		if err != nil {
			return nil, fmt.Errorf("compile server %q: %w", def.Name, err)
		}
		resolver := usedVersions{Resolver: d.registry.Resolver(r.Account), used: used}
		if cached, err = d.build(ctx, resolver, r.Account, r.Server, compiled); err != nil {
			return nil, err
		}
		cached.generation = generation
		d.mu.Lock()
		if len(d.replays) > 256 {
			clear(d.replays)
		}
		d.replays[key] = cached
		d.mu.Unlock()
	}
	server := cached.server
	server.Preview = true
	return &server, nil
}

// replayKey names a server resolved for replays: a version or a draft's
// content, with the versions its unpinned references call.
type replayKey struct {
	account, id string
	version     int
	used        string
}

// replayAuthority checks that both the replayer and the original principal
// may INVOKE the server, and sets the layers every call runs under: the
// replayer's, the original principal's with the original claims, then the
// server's.
func (d *directory) replayAuthority(ctx context.Context, r Replay, server *Server, who *auth.Identity) error {
	document := action.Document(r.Server)
	invoke := policy.Request{Operation: policy.Invoke, Resource: action.ResourceAction, Document: document}
	var layers []policy.Layer
	if !r.Replayer.Root {
		// The replayer's layers keep its own claims; the request's claims
		// are the original's.
		for _, layer := range r.Replayer.Layers {
			if layer.Claims == nil {
				layer.Claims = r.Replayer.Claims
			}
			layers = append(layers, layer)
		}
		check := invoke
		check.Claims = r.Replayer.Claims
		if err := policy.Check(ctx, check, layers...); err != nil || len(layers) == 0 {
			return coded.Wrap(CodeReplayDenied, err, "the replayer may not invoke this MCP server").WithHint("Ask an administrator for INVOKE on the server's action.")
		}
	}
	policies, _, err := d.registry.Principal(ctx, r.Account, who.Principal)
	if err != nil {
		return err
	}
	original := policy.Layer{Name: policy.LayerPrincipal, Policies: policies, PrincipalID: who.Principal, Claims: who.Claims}
	check := invoke
	check.Claims = who.Claims
	if err := policy.Check(ctx, check, original); err != nil {
		return coded.Wrap(CodeReplayDenied, err, "the original request's principal may no longer invoke this MCP server").
			WithHint("A replay can do nothing the original principal could not; replay a request of a principal that may invoke it.")
	}
	layers = append(layers, original)
	if len(server.Definition.Policies) > 0 {
		layers = append(layers, policy.Layer{Name: policy.LayerServer, Policies: server.Definition.Policies, ActionID: server.ActionID})
	}
	server.Layers, server.Claims, server.Invokable = layers, who.Claims, true
	return nil
}

// usedVersions resolves a name without a version to the version the
// original request called, when it called one.
type usedVersions struct {
	action.Resolver
	used map[string]int
}

func (u usedVersions) Resolve(ctx context.Context, name string, version int) (action.Target, error) {
	if v, ok := u.used[name]; ok && version == 0 {
		version = v
	}
	return u.Resolver.Resolve(ctx, name, version)
}

// replayTasks are a replay's tasks: a start is recorded as not started
// (CANCELLED, preview, notStarted, with the agent's input) beneath the
// replay and never queued; a cancel reads the task and cancels nothing;
// a read reads the original session's task (ACT-559..562).
type replayTasks struct {
	ex    *exchange
	inner engine.Tasks
}

func (r replayTasks) Start(ctx context.Context, start engine.TaskStart) (engine.Task, error) {
	input, err := json.Marshal(start.Input)
	if err != nil {
		return engine.Task{}, fmt.Errorf("gateway: encode the not-started task's input: %w", err)
	}
	now := r.ex.h.opts.Clock.Now()
	who := start.Who
	e := &store.Execution{
		ID: r.ex.h.opts.IDs.New(), Account: start.Scope.Account, ActionID: start.Agent.ID, ActionVersion: int64(start.Agent.Version),
		ActionName: start.Agent.Definition.Name, EventType: "task.start", Role: store.RoleTask, StartedBy: start.StartedBy,
		Status: store.Cancelled, Caller: who.Principal, Subject: who.Subject, Client: who.Client, Input: input, Preview: true,
		Draft: start.Draft, Invocation: json.RawMessage(`{"notStarted":true}`), StartedAt: now, EndedAt: now,
	}
	r.ex.recordCall(e)
	return engine.Task{ID: e.ID, Status: store.Cancelled, CreatedAt: now, UpdatedAt: now, Preview: true}, nil
}

func (r replayTasks) Get(ctx context.Context, scope engine.TaskScope, id string) (engine.Task, error) {
	if r.inner == nil {
		return engine.Task{}, engine.ErrTaskNotFound
	}
	return r.inner.Get(ctx, scope, id)
}

// Cancel cancels nothing: the original task is read, as it is.
func (r replayTasks) Cancel(ctx context.Context, scope engine.TaskScope, id string, _ engine.CancelledBy) (engine.Task, error) {
	return r.Get(ctx, scope, id)
}
