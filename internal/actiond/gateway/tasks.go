package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/mcpkit"
)

// addTaskMethods answers the Tasks extension's methods (tasks/get,
// tasks/update, tasks/cancel) with mcpkit's wire types. This issue runs no
// callable agents, so no task can be reached: every task a request names is
// unknown, and gets the same answer whatever its id.
func (h *Handler) addTaskMethods(sdk *mcp.Server) {
	unknown := func(ctx context.Context) error {
		rerr := newError(codeInvalidParams, errTaskNotFound, http.StatusBadRequest, nil)
		if ex := exchangeFrom(ctx); ex != nil {
			ex.fail(rerr)
		}
		return rerr.jsonrpc()
	}
	must(mcp.AddReceivingCustomMethod(sdk, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, _ *mcpkit.TaskParams) (*mcpkit.GetTaskResult, error) {
		return nil, unknown(ctx)
	}))
	must(mcp.AddReceivingCustomMethod(sdk, "tasks/update", func(ctx context.Context, _ *mcp.ServerSession, _ *mcpkit.UpdateTaskParams) (*mcpkit.AckResult, error) {
		return nil, unknown(ctx)
	}))
	must(mcp.AddReceivingCustomMethod(sdk, "tasks/cancel", func(ctx context.Context, _ *mcp.ServerSession, _ *mcpkit.TaskParams) (*mcpkit.AckResult, error) {
		return nil, unknown(ctx)
	}))
}

// must stops at a method the SDK refuses to add: only a name that shadows a
// standard method is refused, and these names are fixed, so that is a
// programming error every test that starts a server finds.
func must(err error) {
	if err != nil {
		panic("gateway: " + err.Error())
	}
}
