package gateway

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// taskParams are the params of the Tasks extension's methods.
type taskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type emptyResult struct {
	mcp.ResultBase
}

// taskNotFound answers a task request: this issue runs no callable agents, so
// no task can be reached, and every unknown task gets the same answer.
func (h *Handler) taskNotFound(ctx context.Context, taskID string) error {
	rerr := newError(codeInvalidParams, errTaskNotFound, http.StatusBadRequest, nil)
	if ex := exchangeFrom(ctx); ex != nil {
		ex.fail(rerr)
	}
	return rerr.jsonrpc()
}
