package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// sdkServers keeps one SDK server per server version, for what the SDK
// still answers: server/discover (2026-07-28), the handshake of the earlier
// revisions (initialize, ping), and notifications. Everything else the
// endpoint answers itself (protocol.go, methods.go).
type sdkServers struct {
	h *Handler
	// logger is the SDK's: its per-request INFO lines at DEBUG.
	logger *slog.Logger
	mu     sync.Mutex
	// by "<account>/<action id>@<version>"
	handlers map[string]http.Handler
}

func newSDKServers(h *Handler) *sdkServers {
	return &sdkServers{h: h, logger: sdkLogger(h.opts.Logger), handlers: map[string]http.Handler{}}
}

func (s *sdkServers) handler(server *Server) http.Handler {
	key := server.Account + "/" + server.ActionID + "@" + strconv.FormatInt(server.Version, 10)
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.handlers[key]; ok {
		return h
	}
	sdk := mcp.NewServer(implementation(server), s.h.serverOptions(server))
	sdk.AddReceivingMiddleware(identify(server))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return sdk }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		Logger:       s.logger,
	})
	if len(s.handlers) > 1024 {
		clear(s.handlers) // old versions; rebuilt on demand
	}
	s.handlers[key] = h
	return h
}

// serve lets the SDK answer an admitted request into a buffer, and
// returns its answer.
func (s *sdkServers) serve(r *http.Request, ex *exchange) *reply {
	buffer := newBufferedResponse()
	req := r.Clone(r.Context())
	req.Body = readCloser{bytes.NewReader(ex.body)}
	req.ContentLength = int64(len(ex.body))
	s.handler(ex.server).ServeHTTP(buffer, req)
	return buffer.reply()
}

// identify stamps every result of a server version with its identity,
// and keeps the Tasks extension out of the handshake's answer.
func identify(server *Server) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			result, err := next(ctx, method, req)
			if err != nil {
				return nil, err
			}
			if init, ok := result.(*mcp.InitializeResult); ok {
				result = withoutTasks(init)
			}
			// ping's empty result cannot carry _meta: the SDK's type panics
			// on it, in a goroutine of its own, which would end the process.
			if result != nil && method != "ping" {
				annotate(server, result)
			}
			return result, nil
		}
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

// annotate puts the server's name and answering version, and the preview
// marker, in a result's _meta.
func annotate(server *Server, result mcp.Result) {
	meta := result.GetMeta()
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/serverInfo"] = map[string]any{"name": server.MCPName, "version": strconv.FormatInt(server.Version, 10)}
	if server.Preview {
		meta["com.twisp/preview"] = true
	}
	result.SetMeta(meta)
}

// complete is a result as the request's revision sends it: 2026-07-28
// requires resultType on every result, which the SDK's own result types
// carry in a member of their own, and the others get from a wrapper.
func (ex *exchange) complete(res mcp.Result) mcp.Result {
	if ex.req.version < newProtocol {
		return res
	}
	switch r := res.(type) {
	case *mcp.ListToolsResult:
		r.ResultType = mcpkit.ResultComplete
	case *mcp.ListResourcesResult:
		r.ResultType = mcpkit.ResultComplete
	case *mcp.ListResourceTemplatesResult:
		r.ResultType = mcpkit.ResultComplete
	case *mcp.ListPromptsResult:
		r.ResultType = mcpkit.ResultComplete
	default:
		return completeResult{res}
	}
	return res
}

// completeResult is a result sent with resultType "complete".
type completeResult struct{ mcp.Result }

func (r completeResult) MarshalJSON() ([]byte, error) {
	body, err := json.Marshal(r.Result)
	if err != nil || len(body) < 2 || body[0] != '{' {
		return body, err
	}
	if len(body) == 2 {
		return []byte(`{"resultType":"complete"}`), nil
	}
	return append([]byte(`{"resultType":"complete",`), body[1:]...), nil
}
