package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/executor"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/graph/generated"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// Env is what one operation runs against.
type Env struct {
	// Store holds the records (executions, sessions) the operation reads.
	Store *store.Store
	// Work holds the business rows the operation reads and writes (actions,
	// principals, KV values). Execute leaves it unapplied.
	Work *store.Work
	// Account is the account the operation runs in; it must be Work's.
	Account string
	Access  Access
	// Clock stamps created and modified times; default the real clock.
	Clock clock.Clock
	// IDs makes IDs for what an operation creates without a caller-given
	// one. No operation needs it yet: createAction takes its id argument.
	IDs IDs
	// RecordWrites says the caller applies Response.Records in the
	// transaction that commits its own records. Without it, an operation
	// that writes records (closeSession) is refused rather than answered
	// with a write nobody would commit.
	RecordWrites bool
	// Natives describes the native tools the engine runs, for a server's
	// offered tools; nil lists none.
	Natives NativeTools
	// Replayer reruns recorded MCP requests (replayExecution); nil refuses.
	Replayer Replayer
}

// IDs makes IDs.
type IDs interface{ New() string }

// Request is one GraphQL request.
type Request struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables,omitempty"`
	OperationName string         `json:"operationName,omitempty"`
}

// RecordWrite is a write to the records rather than the business rows, such
// as closeSession's: it is not part of a Work, so it is applied in the
// transaction that commits the request.
type RecordWrite func(ctx context.Context, tx *store.Tx) error

// Response is what an operation answered. When Errors is not empty, Data is
// null and the operation wrote nothing.
type Response struct {
	Data   json.RawMessage `json:"data"`
	Errors gqlerror.List   `json:"errors,omitempty"`
	// Records are the record writes the operation made (closeSession). Execute
	// does not apply them: the caller applies them with ApplyRecords in the
	// transaction that commits its own records, or drops them along with the
	// Work (a preview). Empty when Errors is not.
	Records []RecordWrite `json:"-"`
	// DryRun is set for a mutation marked @dryRun: Data is what it would
	// have done, and neither its writes nor its records are kept.
	DryRun bool `json:"-"`
}

// ApplyRecords applies the response's record writes in tx.
func (r *Response) ApplyRecords(ctx context.Context, tx *store.Tx) error {
	for _, write := range r.Records {
		if err := write(ctx, tx); err != nil {
			return err
		}
	}
	return nil
}

// Execute runs one operation against a caller's unit of work, as a tool's
// graphql() call does: the operation's writes join env.Work only when it
// succeeds, and nothing is applied or committed here. The caller previews or
// applies env.Work, and (with env.RecordWrites) applies or drops
// Response.Records, as one transaction.
func Execute(ctx context.Context, env Env, req Request) *Response {
	if env.Work == nil || env.Store == nil {
		return errorResponse(errors.New("graph: Execute needs the store and a unit of work"))
	}
	if env.Account == "" {
		env.Account = env.Work.Account()
	}
	if env.Account != env.Work.Account() {
		return errorResponse(fmt.Errorf("graph: Execute in account %s with a unit of work of account %s", env.Account, env.Work.Account()))
	}
	outer := env.Work
	env.Work = outer.Nested()
	resp := run(ctx, env, req)
	if len(resp.Errors) == 0 && !resp.DryRun {
		outer.Merge(env.Work)
	}
	return resp
}

// request is one operation's state, carried in the context to every
// resolver: all of them share one unit of work.
type request struct {
	env Env
	now time.Time

	// fields counts the fields resolved, against MaxFields.
	fields atomic.Int64

	mu      sync.Mutex
	records []RecordWrite
	// drafts are the replay drafts this operation validated, by server,
	// version and content.
	drafts map[string]action.Target
}

type requestKey struct{}

func current(ctx context.Context) *request {
	st, _ := ctx.Value(requestKey{}).(*request)
	if st == nil {
		// Only resolvers read it, and run always sets it.
		panic("graph: a resolver ran outside an operation")
	}
	return st
}

func (st *request) addRecord(write RecordWrite) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.records = append(st.records, write)
}

// Parsed and validated documents are cached by their text, so that a tool
// running the same document again skips both.
const (
	queryCacheSize   = 1024
	parserTokenLimit = 100_000
)

var engine = sync.OnceValue(func() *executor.Executor {
	exec := executor.New(generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}}))
	exec.SetQueryCache(lru.New[*ast.QueryDocument](queryCacheSize))
	exec.SetErrorPresenter(present)
	exec.SetRecoverFunc(recoverPanic)
	exec.SetParserTokenLimit(parserTokenLimit)
	exec.Use(extension.Introspection{})
	exec.AroundFields(fieldBudget)
	return exec
})

// run executes an operation with env; on any error the response's data is
// null, and its writes stay in env.Work for the caller to drop.
func run(ctx context.Context, env Env, req Request) *Response {
	if env.Clock == nil {
		env.Clock = clock.Real{}
	}
	if err := checkLimits(ctx, req); err != nil {
		return errorResponse(err)
	}
	st := &request{env: env, now: env.Clock.Now().UTC()}
	ctx = graphql.StartOperationTrace(context.WithValue(ctx, requestKey{}, st))
	exec := engine()
	opCtx, errs := exec.CreateOperationContext(ctx, &graphql.RawParams{
		Query:         req.Query,
		Variables:     req.Variables,
		OperationName: req.OperationName,
	})
	if len(errs) > 0 {
		var op *ast.OperationDefinition
		if opCtx != nil {
			op = opCtx.Operation
		}
		failed := exec.DispatchError(graphql.WithOperationContext(ctx, opCtx), explain(errs, op))
		return &Response{Errors: failed.Errors}
	}
	handler, ctx := exec.DispatchOperation(ctx, opCtx)
	result := handler(ctx)
	if result == nil {
		// gqlgen's handler gives no response at all for an operation
		// whose context ended under it (a request past its deadline).
		return errorResponse(noResponse(ctx))
	}
	resp := &Response{Data: result.Data, Errors: result.Errors}
	if len(resp.Errors) > 0 {
		resp.Data = nil
		return resp
	}
	resp.DryRun = opCtx.Operation.Operation == ast.Mutation && opCtx.Operation.Directives.ForName("dryRun") != nil
	if !resp.DryRun {
		st.mu.Lock()
		resp.Records = st.records
		st.mu.Unlock()
	}
	return resp
}

// noResponse says why an operation gave no response: its context's end,
// or, when that did not end, that the engine gave none.
func noResponse(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("the operation was stopped before it answered: %w", err)
	}
	return errors.New("the GraphQL engine gave no response to the operation")
}

func errorResponse(err error) *Response {
	return &Response{Errors: gqlerror.List{gqlError(nil, err)}}
}
