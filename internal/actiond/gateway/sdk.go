package gateway

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// sdkServers keeps one SDK server per server version: the SDK speaks the
// protocol (every revision, discovery, framing); the endpoint's middleware
// answers the methods whose results come from actions and records them.
type sdkServers struct {
	h  *Handler
	mu sync.Mutex
	// by "<account>/<action id>@<version>"
	handlers map[string]http.Handler
}

func newSDKServers(h *Handler) *sdkServers {
	return &sdkServers{h: h, handlers: map[string]http.Handler{}}
}

func (s *sdkServers) handler(server *Server) http.Handler {
	key := server.Account + "/" + server.ActionID + "@" + strconv.FormatInt(server.Version, 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.handlers[key]; ok {
		return h
	}
	sdk := s.newServer(server)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sdk }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.h.opts.Logger,
	})
	if len(s.handlers) > 1024 {
		clear(s.handlers) // old versions; rebuilt on demand
	}
	s.handlers[key] = h
	return h
}

// newServer is the SDK server of one server version: discovery and the
// handshake from discover.go, the Tasks methods from tasks.go, and the
// middleware that answers tools/list and tools/call (tools.go).
func (s *sdkServers) newServer(server *Server) *mcp.Server {
	sdk := mcp.NewServer(implementation(server), s.h.serverOptions(server))
	s.h.addTaskMethods(sdk)
	sdk.AddReceivingMiddleware(s.h.middleware)
	return sdk
}

// middleware answers tools/list and tools/call from the request's resolved
// server, and stamps every result with the server's identity.
func (h *Handler) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ex := exchangeFrom(ctx)
		if ex == nil {
			return next(ctx, method, req)
		}
		var result mcp.Result
		var err error
		// The SDK runs handlers detached from the HTTP request; the work of
		// the request runs under ex.ctx, which ends when the client goes
		// away or the server's response timeout passes.
		run := ex.ctx
		switch method {
		case "tools/list":
			result, err = h.listTools(run, ex)
		case "tools/call":
			params, _ := req.GetParams().(*mcp.CallToolParamsRaw)
			result, err = h.callTool(run, ex, params)
		case "initialize":
			result, err = next(ctx, method, req)
			if init, ok := result.(*mcp.InitializeResult); ok {
				result = withoutTasks(init)
			}
		default:
			result, err = next(ctx, method, req)
		}
		if err != nil {
			if run.Err() == context.DeadlineExceeded {
				rerr := newError(codeInternal, errDeadline, http.StatusInternalServerError,
					map[string]any{"responseTimeout": int(ex.deadline().Seconds())})
				ex.fail(rerr)
				return nil, rerr.jsonrpc()
			}
			return nil, err
		}
		// ping's empty result cannot carry _meta: the SDK's type panics on
		// it, in a goroutine of its own, which would end the process.
		if result != nil && method != "ping" {
			ex.annotate(result)
		}
		return result, nil
	}
}

// withoutTasks is a handshake's answer without the Tasks extension: hosts of
// the revisions before 2026-07-28 get tools, not tasks (ACT-139).
func withoutTasks(init *mcp.InitializeResult) *mcp.InitializeResult {
	if init.Capabilities == nil || init.Capabilities.Extensions[mcpkit.TasksExtension] == nil {
		return init
	}
	out := *init
	caps := *init.Capabilities
	caps.Extensions = maps.Clone(caps.Extensions)
	delete(caps.Extensions, mcpkit.TasksExtension)
	if len(caps.Extensions) == 0 {
		caps.Extensions = nil
	}
	out.Capabilities = &caps
	return &out
}

// callResult is a tools/call result as the request's revision sends it.
// The SDK marks a result complete only on the tool path it serves itself,
// and 2026-07-28 requires resultType on every tools/call result.
func (ex *exchange) callResult(res *mcp.CallToolResult) mcp.Result {
	if ex.req.version < newProtocol {
		return res
	}
	return completeCallResult{res}
}

// completeCallResult is a CallToolResult sent with resultType "complete".
type completeCallResult struct{ *mcp.CallToolResult }

func (r completeCallResult) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(r.CallToolResult)
	if err != nil || len(body) < 2 || body[0] != '{' {
		return body, err
	}
	if len(body) == 2 {
		return []byte(`{"resultType":"complete"}`), nil
	}
	return append([]byte(`{"resultType":"complete",`), body[1:]...), nil
}

// annotate puts the server's name and answering version, and the preview
// marker, in a result's _meta.
func (ex *exchange) annotate(result mcp.Result) {
	meta := result.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	info := implementation(ex.server)
	meta["io.modelcontextprotocol/serverInfo"] = map[string]any{"name": info.Name, "version": info.Version}
	if ex.server.Preview {
		meta["com.twisp/preview"] = true
	}
	result.SetMeta(meta)
}
