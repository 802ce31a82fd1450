package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/gateway"
	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
	"github.com/incusspawn/isx/internal/coded"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// graphQL runs a tool's GraphQL operations in the request's unit of work,
// under the call's policy layers.
type graphQL struct {
	store *store.Store
	clock clock.Clock
	ids   graph.IDs
}

func (g graphQL) Execute(ctx context.Context, op engine.Operation) (any, error) {
	resp := graph.Execute(ctx, graph.Env{
		Store: g.store, Work: op.Work, Account: op.Account, Clock: g.clock, IDs: g.ids, Natives: nativeTools,
		Access: graph.Access{Principal: op.Principal, Claims: op.Claims, Layers: op.Layers},
	}, graph.Request{Query: op.Query, Variables: op.Variables, OperationName: op.OperationName})
	if len(resp.Errors) > 0 {
		return nil, failedOperation(resp)
	}
	var data any
	if err := json.Unmarshal(resp.Data, &data); err != nil {
		return nil, err
	}
	return data, nil
}

// Validate checks a document a program passes to graphql() before the
// program runs.
func (g graphQL) Validate(document, operationName string) ([]string, error) {
	op, err := graph.Validate(document, operationName)
	if err != nil {
		return nil, err
	}
	var required []string
	for _, v := range op.Variables {
		if v.Required {
			required = append(required, v.Name)
		}
	}
	return required, nil
}

// nativeTools answers the API's question about the native tools the engine
// runs, as a server lists them.
func nativeTools(name string) (graph.NativeTool, bool) {
	native, ok := engine.Native(name)
	if !ok {
		return graph.NativeTool{}, false
	}
	return graph.NativeTool{Description: native.Description(), InputSchema: mcpkit.SchemaMap(native.InputSchema())}, true
}

// operationFailure is a GraphQL operation's errors as a tool failure: the
// first error's code and hint, every message.
type operationFailure struct {
	coded.Base
	resp *graph.Response
}

func failedOperation(resp *graph.Response) *operationFailure {
	first := resp.Errors[0]
	code, _ := first.Extensions["code"].(string)
	if code == "" {
		code = graph.CodeBadRequest
	}
	hint, _ := first.Extensions["hint"].(string)
	return &operationFailure{Base: coded.Base{Code: code, Message: resp.Errors.Error(), Hint: hint}, resp: resp}
}

// Error is the message alone: every error's message.
func (f *operationFailure) Error() string { return f.Message }

func (f *operationFailure) ToolFailure() *engine.Failure {
	messages := make([]string, 0, len(f.resp.Errors))
	details := make([]map[string]any, 0, len(f.resp.Errors))
	for _, e := range f.resp.Errors {
		messages = append(messages, e.Message)
		detail := map[string]any{"message": e.Message, "path": e.Path, "extensions": e.Extensions}
		// The public message leaves out who was denied by which policy of
		// which action; the record keeps it (ACT-131, ACT-132).
		var denied *policy.Denied
		if errors.As(e.Err, &denied) {
			detail["denial"] = denied.Detail()
		}
		details = append(details, detail)
	}
	return engine.NewFailure(f.Code, strings.Join(messages, "\n"), f.Hint).WithDetail(details)
}

// replayer lets the API replay recorded requests through the MCP endpoint.
type replayer struct{ endpoint *gateway.Handler }

func (r replayer) Replay(ctx context.Context, req graph.ReplayRequest) (*graph.ReplayResult, error) {
	out, err := r.endpoint.Replay(ctx, gateway.Replay{
		Account: req.Account, Original: req.Original, Calls: req.Calls, Server: req.Server, Draft: req.Draft,
		Replayer: gateway.ReplayPrincipal{Root: req.Root, Principal: req.Principal, Subject: req.Subject, Client: req.Client, Claims: req.Claims, Layers: req.Layers},
	})
	if err != nil {
		return nil, err
	}
	return &graph.ReplayResult{Execution: out.Execution, Calls: out.Calls}, nil
}

func (r replayer) Rerun(ctx context.Context, req graph.RerunRequest) (string, error) {
	return r.endpoint.Rerun(ctx, gateway.Rerun{
		Account: req.Account, Original: req.Original, Agent: req.Agent,
		Rerunner: gateway.ReplayPrincipal{Principal: req.Principal, Subject: req.Subject, Client: req.Client, Claims: req.Claims, Layers: req.Layers},
	})
}
