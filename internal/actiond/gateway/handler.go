// Package gateway is the MCP endpoint of actiond: /mcp/v1/<account>/<name>.
// Every request that passes its token check is admitted into a session and
// recorded as one execution of the server, and its reply leaves only after
// that record commits. The calls beneath a request are the engine's to run.
//
// One file per step of a request and per method family:
//
//   - handler.go: the HTTP entry, the token check, the refusals that come
//     before a session;
//   - request.go: reading one JSON-RPC message, its revision and headers;
//   - admission.go: admitting a request into its session, or refusing it
//     and recording the refusal outside any session;
//   - exchange.go: an admitted request and its record, from its method to
//     the transaction that records it; reply.go frames its answer, which
//     leaves only then;
//   - protocol.go: what the SDK's transport checks of a request, checked
//     here for the methods the endpoint answers itself; methods.go: which
//     method serves a request;
//   - sdk.go: one SDK server per server version, for discovery, the
//     handshake and notifications;
//   - discover.go: server/discover and the handshake; tools.go: tools/list
//     and tools/call; tasks.go: the Tasks extension's methods;
//     resources.go, prompts.go, skills.go: skills and resources;
//   - errors.go: JSON-RPC errors and tool errors, with their fixed sentences;
//   - server.go and directory.go: a server as one request sees it, resolved
//     from the registry.
package gateway

import (
	"context"
	"errors"
	"go.opentelemetry.io/otel/trace"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// MaxRequestBytes is the largest request the endpoint records; a larger one
// is refused as too large to record.
const MaxRequestBytes = 4 << 20

// Verifier checks bearer tokens.
type Verifier interface {
	Verify(ctx context.Context, raw, audience string) (auth.Identity, error)
}

// Directory resolves the MCP server a request names, as the request sees it
// when it starts.
type Directory interface {
	// Server returns the server, or ErrServerNotFound when there is none the
	// identity may read, or it is disabled.
	Server(ctx context.Context, account, name string, who *auth.Identity) (*Server, error)
}

// ErrServerNotFound is what a Directory returns for a name that is not an
// MCP server the principal can read.
var ErrServerNotFound = errors.New("no such MCP server")

// IDs makes execution IDs.
type IDs interface{ New() string }

// Options configure the endpoint.
type Options struct {
	Store     *store.Store
	Directory Directory
	Verifier  Verifier
	Runner    Runner
	// Tasks reads and cancels the tasks a session's calls started.
	Tasks engine.Tasks
	// Process names this process: the owner of the requests it admits,
	// which another process settles should this one die.
	Process string
	IDs     IDs
	Clock   clock.Clock
	// PublicURL is where clients reach actiond, e.g. http://localhost:8080;
	// MCP tokens must name PublicURL + "/mcp" in aud.
	PublicURL string
	Logger    *slog.Logger
	// Meter, when set, is told of every request and refusal (metering.go).
	Meter Meter
	// Tracer, when set, makes a span of every request and of each call it
	// made (tracing.go).
	Tracer trace.Tracer
}

// Handler serves /mcp/v1/<account>/<name>.
type Handler struct {
	opts    Options
	servers *sdkServers
	settler *settler
}

// New makes the endpoint.
func New(opts Options) *Handler {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	h := &Handler{opts: opts}
	h.servers = newSDKServers(h)
	h.settler = startSettler(opts.Store, opts.Clock, opts.Logger)
	return h
}

// Close stops the endpoint's background work: record writes still waiting
// for the database are tried once more, then left to the process that
// settles this one's work.
func (h *Handler) Close() { h.settler.close() }

// Audience is the aud an MCP token must carry.
func (h *Handler) Audience() string { return auth.MCPAudience(h.opts.PublicURL) }

// ResourceMetadataURL is where a server's Protected Resource Metadata lives.
func (h *Handler) ResourceMetadataURL(account, name string) string {
	return auth.ResourceMetadataURL(h.opts.PublicURL, account, name)
}

// serveHTTP handles one POST to an MCP server's endpoint.
func (h *Handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	account, name, ok := auth.ParseMCPPath(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if rebound(r) {
		// A page in a browser must not reach a server on loopback through a
		// name it controls (DNS rebinding): refused before anything else.
		http.Error(w, "forbidden: the Host header does not name this loopback server", http.StatusForbidden)
		return
	}
	if r.Method != http.MethodPost {
		// Stateless: no standalone SSE stream and no session to delete.
		w.Header().Set("Allow", "POST")
		http.Error(w, "this MCP server is stateless and accepts only POST", http.StatusMethodNotAllowed)
		return
	}
	body, tooLarge, err := readBody(r)
	if err != nil {
		newError(codeInvalidParams, errBadRequest, http.StatusBadRequest, nil).write(w, nil)
		return
	}
	var req *rpcRequest
	var rerr *rpcError
	if tooLarge {
		// Only a prefix was kept, which does not decode: what it says of
		// the request is read as far as it goes, for the refusal's record.
		req = peek(body, r.Header)
	} else if req, rerr = decode(body, r.Header); rerr != nil {
		rerr.write(w, idOf(req))
		return
	}
	meterRequest(w, "", req.Method)
	span, r := h.startTrace(r, req)
	defer span.end()
	who, ok := h.authenticate(w, r, account, name, req)
	if !ok {
		span.failed(errUnauthorized)
		return
	}
	ex := &exchange{h: h, account: account, who: who, req: req, body: body, started: h.opts.Clock.Now(), trace: span}
	ex.setInput()
	if !contains(who.Accounts, account) {
		newError(codeInvalidParams, errServerNotFound, http.StatusNotFound, map[string]any{"name": name}).write(w, idOf(req))
		return
	}
	server, err := h.opts.Directory.Server(r.Context(), account, name, who)
	if errors.Is(err, ErrServerNotFound) {
		newError(codeInvalidParams, errServerNotFound, http.StatusNotFound, map[string]any{"name": name}).write(w, idOf(req))
		return
	}
	if err != nil {
		h.opts.Logger.Error("resolve MCP server", "account", account, "name", name, "err", err)
		newError(codeInternal, errInternal, http.StatusInternalServerError, nil).write(w, idOf(req))
		return
	}
	ex.server = server
	meterRequest(w, server.Name, req.Method)
	if tooLarge {
		h.refuse(w, r, ex, newError(codeInvalidParams, errTooLarge, http.StatusRequestEntityTooLarge, map[string]any{"limitBytes": MaxRequestBytes}))
		return
	}
	if !req.isCall() {
		h.forwardNotification(w, r, ex)
		return
	}
	if rerr := h.gate(ex); rerr != nil {
		h.refuse(w, r, ex, rerr)
		return
	}
	h.serveAdmitted(w, r, ex)
}

func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, false, err
	}
	if len(body) > MaxRequestBytes {
		// Keep a readable prefix for the refusal's record; drain the rest.
		io.Copy(io.Discard, r.Body)
		return body[:4096], true, nil
	}
	return body, false, nil
}

// authenticate checks the bearer token, answering 401 when it fails.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, account, name string, req *rpcRequest) (*auth.Identity, bool) {
	raw, err := auth.BearerToken(r)
	if err == nil {
		var who auth.Identity
		who, err = h.opts.Verifier.Verify(r.Context(), raw, h.Audience())
		if err == nil {
			return &who, true
		}
		h.opts.Logger.Info("MCP token refused", "account", account, "name", name, "err", err)
	}
	h.meterRefused(errUnauthorized)
	auth.SetChallenge(w.Header(), h.ResourceMetadataURL(account, name), err)
	// The body says which kind of check failed, in auth's public words only.
	reason, sentence := auth.Public(err)
	data := map[string]any{"reason": string(reason), "hint": sentence}
	body := errorBody(idOf(req), newError(codeUnauthorized, errUnauthorized, http.StatusUnauthorized, data))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write(body)
	return nil, false
}

// gate applies the refusals that come after the token check and before a
// session: a missing INVOKE, a method the server does not serve, a task
// request from a client without the Tasks extension.
func (h *Handler) gate(ex *exchange) *rpcError {
	if !ex.server.Invokable {
		return newError(codeInvalidParams, errForbidden, http.StatusForbidden, map[string]any{"name": ex.server.Name})
	}
	method := ex.req.Method
	if !ex.server.serves(method, ex.req.version) {
		return newError(codeMethodNotFound, errMethodNotFound, http.StatusNotFound, map[string]any{"method": method})
	}
	if strings.HasPrefix(method, "tasks/") && !ex.req.hasExtension(mcpkit.TasksExtension) {
		return newError(codeMissingCapability, errTaskRequired, http.StatusBadRequest,
			map[string]any{"method": method, "requiredCapabilities": mcpkit.RequiredTasks()})
	}
	return nil
}

func idOf(req *rpcRequest) []byte {
	if req == nil {
		return nil
	}
	return req.ID
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// rebound says whether a request reached a loopback listener under a Host
// that is not a loopback name.
func rebound(r *http.Request) bool { return auth.Rebound(r) }
