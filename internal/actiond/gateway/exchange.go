package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// exchange is one request from its admission to its recorded reply.
type exchange struct {
	h       *Handler
	account string
	who     *auth.Identity
	req     *rpcRequest
	body    []byte
	server  *Server
	started time.Time
	// ctx bounds the request's work: it ends when the client goes away or
	// the server's response timeout passes.
	ctx context.Context

	executionID string
	session     store.SessionKey
	// sessionInput is the session's input, fixed when it was created.
	sessionInput json.RawMessage
	record       map[string]any // execution.input: the request as recorded
	recordJSON   json.RawMessage

	mu sync.Mutex
	// What the method handler did, recorded at completion.
	calls      []*store.Execution
	uses       []store.Use
	invocation map[string]any
	work       *store.Work
	failure    *rpcError // a JSON-RPC error the handler answered with
	handled    bool
	// tasks the request started: cancelled, never run, when its record
	// does not commit, since its client never learns of them.
	tasks []string
	// replayTasks, in a replay, takes the endpoint's tasks' place: it
	// starts and cancels nothing.
	replayTasks engine.Tasks
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

// requestDeadline bounds a request by the server's response timeout.
func (ex *exchange) deadline() time.Duration {
	if ex.server.ResponseTimeout > 0 {
		return ex.server.ResponseTimeout
	}
	return time.Minute
}

// serveAdmitted admits the request, lets the SDK serve it into a buffer,
// commits the record, and only then sends the reply.
func (h *Handler) serveAdmitted(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if rerr := h.admit(r.Context(), ex); rerr != nil {
		h.refuse(w, r, ex, rerr)
		return
	}
	// A replay evaluates the original principal's policies with the
	// original request's claims.
	if len(ex.who.Claims) > 0 {
		ex.setInvocation("claims", ex.who.Claims)
	}
	// The SDK detaches its handlers from the HTTP request's context and
	// answers nothing once that context ends, so it gets the request's own
	// context; the work the middleware does runs under ex.ctx, bounded by
	// the response timeout, so that a passed deadline is answered.
	ctx := context.WithValue(r.Context(), exchangeKey{}, ex)
	var cancel context.CancelFunc
	ex.ctx, cancel = context.WithTimeout(ctx, ex.deadline())
	defer cancel()
	buffer := newBufferedResponse()
	sdkRequest := r.Clone(ctx)
	sdkRequest.Body = readCloser{bytes.NewReader(ex.body)}
	sdkRequest.ContentLength = int64(len(ex.body))
	h.servers.handler(ex.server).ServeHTTP(buffer, sdkRequest)

	status := store.Succeeded
	switch {
	case r.Context().Err() != nil:
		status = store.Cancelled
	case buffer.body.Len() == 0:
		// The SDK answered nothing: never send an empty 200.
		h.opts.Logger.Error("the MCP SDK answered nothing", "execution", ex.executionID, "method", ex.req.Method)
		ex.fail(newError(codeInternal, errInternal, http.StatusInternalServerError, nil))
		buffer.replaceWith(ex.failure, ex.req.ID)
		status = store.Failed
	case ex.failure != nil || buffer.isJSONRPCError():
		status = store.Failed
	}
	if ex.failure != nil && ex.failure.RPC == codeMissingCapability {
		buffer.status = ex.failure.Status // -32021 is HTTP 400 (SEP-2575)
	}
	if err := h.complete(ex, status, buffer); err != nil {
		h.opts.Logger.Error("record MCP request", "execution", ex.executionID, "err", err)
		rerr := newError(codeInternal, errNotRecorded, http.StatusInternalServerError, nil)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContention) {
			rerr = newError(codeInternal, errTransaction, http.StatusServiceUnavailable, map[string]any{"retryable": true})
		}
		if h.recordUncommitted(ex, status, rerr, err) {
			// The completion had committed though its answer was lost:
			// the result is recorded, so it may leave.
			if status != store.Cancelled {
				buffer.flushTo(w)
			}
			return
		}
		if status != store.Cancelled {
			rerr.write(w, ex.req.ID)
		}
		return
	}
	if status == store.Cancelled {
		return // nobody is listening
	}
	buffer.flushTo(w)
}

// complete records the outcome in one transaction: the request's status and
// output, its calls with their write sets, its uses, the session input
// CONSUMED with its call count, and — on a LIVE server — the writes.
func (h *Handler) complete(ex *exchange, status string, buffer *bufferedResponse) error {
	ctx := context.Background()
	ex.mu.Lock()
	defer ex.mu.Unlock()
	request := ex.execution(store.RoleRequest, status, nil, ex.failure, nil)
	request.Output = buffer.resultOrError()
	if status == store.Failed && ex.failure == nil {
		request.Error = buffer.reply().Error
	}
	if ex.failure != nil {
		request.Invocation = ex.invocationJSON(ex.failure, ex.failure.Data)
	} else {
		request.Invocation = ex.invocationJSON(nil, nil)
	}
	return h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		if ex.work != nil && !ex.server.Preview && status == store.Succeeded {
			if err := tx.Apply(ctx, ex.work); err != nil {
				return err
			}
		}
		for _, call := range ex.calls {
			if err := tx.InsertExecution(ctx, call); err != nil {
				return err
			}
		}
		if err := tx.FinishExecution(ctx, request); err != nil {
			return err
		}
		for _, use := range ex.uses {
			if err := tx.AddUse(ctx, ex.executionID, use); err != nil {
				return err
			}
		}
		return tx.ConsumeSessionInput(ctx, ex.session, ex.executionID, len(ex.calls))
	})
}

// recordUncommitted records, in a write of its own, a request whose
// completion did not commit (ACT-105): FAILED with the error its client gets
// instead of the result, its calls kept as rolled back by it, its session
// input CONSUMED, and the tasks it started cancelled before they run.
// Nothing it wrote is applied and no use is recorded, since no output left.
// The write is tried a few times at once; when the database does not take
// it, it is kept and made once the database answers, so that the request
// does not stay RUNNING. It reports whether the completion had committed
// after all (the record is the one complete wrote), in which case the
// buffered result may be sent.
func (h *Handler) recordUncommitted(ex *exchange, status string, rerr *rpcError, cause error) (committed bool) {
	ex.mu.Lock()
	if status != store.Cancelled {
		status = store.Failed
	}
	request := ex.execution(store.RoleRequest, status, nil, rerr, nil)
	request.Output, _ = json.Marshal(map[string]any{"error": rerr.wire()})
	request.Invocation = ex.invocationJSON(rerr, map[string]any{"cause": cause.Error()})
	calls := make([]*store.Execution, len(ex.calls))
	for i, call := range ex.calls {
		kept := *call
		if kept.RolledBackBy == "" {
			kept.RolledBackBy = ex.executionID
		}
		calls[i] = &kept
	}
	started := append([]string(nil), ex.tasks...)
	ex.mu.Unlock()
	by, _ := json.Marshal(map[string]any{"principal": ex.who.Principal, "subject": ex.who.Subject, "executionId": ex.executionID})
	write := func(ctx context.Context, tx *store.Tx) error {
		final := *request
		if err := tx.FinishExecution(ctx, &final); err != nil {
			return err
		}
		for _, call := range calls {
			if err := tx.InsertExecution(ctx, call); err != nil {
				return err
			}
		}
		for _, id := range started {
			if _, err := tx.CancelTask(ctx, ex.account, id, by); err != nil {
				return err
			}
		}
		return tx.ConsumeSessionInput(ctx, ex.session, ex.executionID, len(calls))
	}
	// Until the database answers, whether the completion committed is not
	// known: the write is tried until it does, within the request's
	// deadline, so that the client is told what the record says. Past the
	// deadline the client gets the error and the write is kept for later.
	ctx := context.Background()
	deadline := ex.started.Add(ex.deadline())
	for try := 1; ; try++ {
		err := h.opts.Store.Write(ctx, func(tx *store.Tx) error { return write(ctx, tx) })
		if err == nil {
			return false
		}
		if errors.Is(err, store.ErrSettled) {
			return h.completedAfterAll(ctx, ex)
		}
		h.opts.Logger.Warn("record MCP request that did not commit", "execution", ex.executionID, "try", try, "err", err)
		if try <= 3 {
			continue // a cut connection is dropped from the pool: the next try takes another
		}
		wait := min(time.Duration(try-3)*100*time.Millisecond, time.Second)
		if h.opts.Clock.Now().Add(wait).After(deadline) {
			break
		}
		<-h.opts.Clock.After(wait)
	}
	h.later.add(write)
	return false
}

// completedAfterAll says whether a request's record that is no longer
// RUNNING is its own completion, which committed though the commit's
// answer was lost, rather than a settlement by another process.
func (h *Handler) completedAfterAll(ctx context.Context, ex *exchange) bool {
	var e *store.Execution
	err := h.opts.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		e, err = tx.Execution(ctx, ex.account, ex.executionID)
		return err
	})
	if err != nil {
		return false
	}
	var recorded struct {
		Code string `json:"code"`
	}
	json.Unmarshal(e.Error, &recorded)
	return e.Status != store.Running && recorded.Code != errNotRecorded && recorded.Code != errAbandoned
}

// forwardNotification hands a notification (initialized, cancelled) to the
// SDK. A notification is not a request: nothing is recorded.
func (h *Handler) forwardNotification(w http.ResponseWriter, r *http.Request, ex *exchange) {
	req := r.Clone(r.Context())
	req.Body = readCloser{bytes.NewReader(ex.body)}
	h.servers.handler(ex.server).ServeHTTP(w, req)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// requestRecord is execution.input: the request as the client sent it, with
// who asked taken from the verified token, never from the body.
func (ex *exchange) requestRecord() map[string]any {
	if ex.record != nil {
		return ex.record
	}
	var params any
	if ex.req.params != nil {
		params = ex.req.params
	}
	var id any
	if len(ex.req.ID) > 0 {
		json.Unmarshal(ex.req.ID, &id)
	}
	ex.record = map[string]any{
		"jsonrpc":         "2.0",
		"id":              id,
		"method":          ex.req.Method,
		"params":          params,
		"principal":       ex.who.Principal,
		"subject":         ex.who.Subject,
		"client":          ex.who.Client,
		"protocolVersion": ex.req.version,
	}
	if ex.req.truncated != "" {
		ex.record["truncated"] = ex.req.truncated
	}
	return ex.record
}

// execution builds the record of the request itself.
func (ex *exchange) execution(role, status string, output json.RawMessage, rerr *rpcError, details map[string]any) *store.Execution {
	if ex.recordJSON == nil {
		ex.recordJSON, _ = json.Marshal(ex.requestRecord())
	}
	input := ex.recordJSON
	e := &store.Execution{
		ID:            ex.h.opts.IDs.New(),
		Account:       ex.account,
		ActionID:      ex.server.ActionID,
		ActionVersion: ex.server.Version,
		ActionName:    ex.server.Name,
		EventType:     "mcp.request",
		Role:          role,
		SessionID:     ex.session.ID,
		Status:        status,
		Caller:        ex.who.Principal,
		Subject:       ex.who.Subject,
		Client:        ex.who.Client,
		Input:         input,
		Output:        output,
		Preview:       ex.server.Preview,
		StartedAt:     ex.started,
	}
	if ex.executionID != "" {
		e.ID = ex.executionID
	}
	if rerr != nil {
		e.Error = rerr.recorded()
		e.Invocation, _ = json.Marshal(map[string]any{"error": rerr.invocationEntry(details)})
	}
	return e
}

// invocationJSON is what the request recorded about itself, with the error
// it answered, when it failed. The caller holds ex.mu.
func (ex *exchange) invocationJSON(failure *rpcError, details any) json.RawMessage {
	invocation := make(map[string]any, len(ex.invocation)+1)
	for k, v := range ex.invocation {
		invocation[k] = v
	}
	if failure != nil {
		invocation["error"] = failure.invocationEntry(details)
	}
	out, _ := json.Marshal(invocation)
	return out
}

func (ex *exchange) setInvocation(key string, value any) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.invocation == nil {
		ex.invocation = map[string]any{}
	}
	ex.invocation[key] = value
}

func (ex *exchange) recordCall(e *store.Execution) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.calls = append(ex.calls, e)
}

func (ex *exchange) addUse(u store.Use) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.uses = append(ex.uses, u)
}

func (ex *exchange) ensureWork(h *Handler) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.work == nil {
		ex.work = h.opts.Store.NewWork(ex.account)
	}
}

func (ex *exchange) startedTask(id string) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.tasks = append(ex.tasks, id)
}

func (ex *exchange) fail(rerr *rpcError) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.failure = rerr
}
