package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
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
		h: h, account: r.Account, who: who, req: req, server: server, started: h.opts.Clock.Now(),
		executionID: h.opts.IDs.New(),
		session:     store.SessionKey{Account: r.Account, ServerID: server.ActionID, ID: r.Original.SessionID},
	}
	ex.setInput()
	ex.sessionInput = h.sessionInput(ctx, ex.session)
	json.Unmarshal(ex.sessionInput, &ex.sessionValues)
	rec := &record{}
	ex.tasks = replayTasks{ex: ex, rec: rec, inner: h.opts.Tasks, reader: r.Replayer}
	result, rerr, err := h.replayMethod(runCtx, ex, rec)
	if err != nil {
		return nil, err // nothing ran: there is no replay to record
	}
	return ex.replayRecord(r, rec, result, rerr), nil
}

// replayMethod runs the recorded method as the endpoint would. Recorded
// params that do not decode as the method's are refused as the endpoint
// would have refused them; discovery and the handshake, which the SDK
// answers, are not replayed.
func (h *Handler) replayMethod(ctx context.Context, ex *exchange, rec *record) (mcp.Result, *rpcError, error) {
	method := ex.req.Method
	if !ex.server.serves(method, ex.req.version) {
		return nil, rec.fail(newError(codeMethodNotFound, errMethodNotFound, http.StatusNotFound, map[string]any{"method": method})), nil
	}
	spec, ok := methodParams[method]
	if !ok {
		return nil, nil, coded.New(CodeReplayUnsupported, "a %s request cannot be replayed yet: only tools, resources, prompts, skills and tasks requests", method).
			WithHint("Replay a tools/call, resources/read, prompts/get, skills/get or tasks/* request, or a listing.")
	}
	if spec.unusual(ex.req.params) && decodeParams(ex.req, spec.decoded()) != nil {
		if strings.HasPrefix(method, "tasks/") {
			return nil, taskNotFound(rec), nil
		}
		return nil, rec.fail(newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, nil)), nil
	}
	result, rerr := h.serveMethod(ctx, ex, rec)
	if rerr != nil && ctx.Err() == context.DeadlineExceeded {
		rerr = rec.fail(ex.deadlineError())
	}
	return result, rerr, nil
}

// replayRecord is the replay's execution: what it answered, what it ran
// beneath it (rolled back by it), and what it replayed.
func (ex *exchange) replayRecord(r Replay, rec *record, result mcp.Result, rerr *rpcError) *ReplayResult {
	now := ex.h.opts.Clock.Now()
	e := &store.Execution{
		ID: ex.executionID, Account: ex.account, ActionID: ex.server.ActionID, ActionVersion: ex.server.Version, ActionName: ex.server.Name,
		EventType: "mcp.replay", Role: store.RoleReplay, Status: store.Succeeded,
		Caller: r.Replayer.Principal, Subject: r.Replayer.Subject, Client: r.Replayer.Client,
		Input: r.Original.Input, Preview: true, StartedAt: ex.started, EndedAt: now,
	}
	if rerr != nil {
		e.Status = store.Failed
		e.Output, _ = json.Marshal(map[string]any{"error": rerr.wire()})
		e.Error = rerr.recorded()
	} else {
		e.Output, _ = json.Marshal(result)
	}
	invocation := struct {
		invocation
		ReplayOf      string `json:"replayOf"`
		Draft         bool   `json:"draft"`
		ServerVersion int64  `json:"serverVersion"`
	}{rec.invocation, r.Original.ID, r.Draft, ex.server.Version}
	e.Invocation, _ = json.Marshal(invocation)
	for _, call := range rec.calls {
		if call.Role != store.RoleTask { // a task not started ran nothing to roll back
			rollBack(call, e.ID)
		}
	}
	return &ReplayResult{Execution: e, Calls: rec.calls}
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
	rec   *record
	inner engine.Tasks
	// reader is who replays: the original session reaches the task, but
	// what the task answered since is the replayer's to read only if the
	// replayer may read the task's execution.
	reader ReplayPrincipal
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
	r.rec.addCalls([]*store.Execution{e})
	return engine.Task{ID: e.ID, Status: store.Cancelled, CreatedAt: now, UpdatedAt: now, Preview: true}, nil
}

func (r replayTasks) Get(ctx context.Context, scope engine.TaskScope, id string) (engine.Task, error) {
	if r.inner == nil {
		return engine.Task{}, engine.ErrTaskNotFound
	}
	task, err := r.inner.Get(ctx, scope, id)
	if err != nil {
		return task, err
	}
	if err := r.mayRead(ctx, scope.Account, id); err != nil {
		return engine.Task{}, err
	}
	return task, nil
}

// mayRead requires SELECT on the task's execution of the replayer, under
// its own layers and claims, as GraphQL's execution(id:) would: a task the
// replayer may not read is not found, as one of another session is.
func (r replayTasks) mayRead(ctx context.Context, account, id string) error {
	if r.reader.Root {
		return nil
	}
	var e *store.Execution
	if err := r.ex.h.opts.Store.Read(ctx, func(tx *store.Tx) (err error) {
		e, err = tx.Execution(ctx, account, id)
		return err
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return engine.ErrTaskNotFound
		}
		return err
	}
	layers := make([]policy.Layer, 0, len(r.reader.Layers))
	for _, layer := range r.reader.Layers {
		if layer.Claims == nil {
			layer.Claims = r.reader.Claims
		}
		layers = append(layers, layer)
	}
	check := policy.Request{Operation: policy.Select, Resource: registry.ResourceExecution, Document: e, Claims: r.reader.Claims}
	if len(layers) == 0 || policy.Check(ctx, check, layers...) != nil {
		return engine.ErrTaskNotFound
	}
	return nil
}

// Cancel cancels nothing: the original task is read, as it is.
func (r replayTasks) Cancel(ctx context.Context, scope engine.TaskScope, id string, _ engine.CancelledBy) (engine.Task, error) {
	return r.Get(ctx, scope, id)
}
