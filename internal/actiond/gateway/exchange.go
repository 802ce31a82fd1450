package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
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
}

type exchangeKey struct{}

func exchangeFrom(ctx context.Context) *exchange {
	ex, _ := ctx.Value(exchangeKey{}).(*exchange)
	return ex
}

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

// refuse answers a refusal that came after the token check, recording it —
// only the first of a principal and subject at a server each minute — as a
// FAILED execution of the server outside any session. It runs nothing.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, ex *exchange, rerr *rpcError) {
	ctx := context.WithoutCancel(r.Context())
	key := store.RefusalKey{Account: ex.account, ServerID: ex.server.ActionID, Principal: ex.who.Principal, Subject: ex.who.Subject}
	err := h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		note, err := tx.NoteRefusal(ctx, key, time.Minute)
		if err != nil || !note.Record {
			return err
		}
		details := map[string]any{}
		if !note.Window.IsZero() {
			details["unrecorded_refusals"] = note.Unrecorded
			details["window"] = note.Window.UTC().Format(time.RFC3339)
		}
		return tx.InsertExecution(ctx, ex.execution(store.RoleRefusal, store.Failed, nil, rerr, details))
	})
	if err != nil {
		// The count is best effort; the refusal itself still stands.
		h.opts.Logger.Warn("record refusal", "err", err)
	}
	h.writeRefusal(w, ex, rerr)
}

// writeRefusal sends a refusal: a tools/call in a closed session is a tool
// error the model can read; everything else a JSON-RPC error.
func (h *Handler) writeRefusal(w http.ResponseWriter, ex *exchange, rerr *rpcError) {
	if rerr.Name == errSessionClosed && ex.req.Method == "tools/call" {
		result := toolError(errSessionClosed, messages[errSessionClosed], hints[errSessionClosed])
		ex.annotate(result)
		writeJSON(w, http.StatusOK, resultBody(ex.req.ID, ex.callResult(result)))
		return
	}
	rerr.write(w, ex.req.ID)
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
		errJSON, _ := json.Marshal(map[string]any{"code": rerr.Name, "message": rerr.message(), "jsonrpc": rerr.Code, "data": rerr.Data})
		e.Error = errJSON
		invocation := map[string]any{"error": map[string]any{"code": rerr.Name, "message": rerr.message(), "details": details}}
		e.Invocation, _ = json.Marshal(invocation)
	}
	return e
}

// admit finds or creates the request's session, applies its refusals and the
// rate limit, and records the request as RUNNING with a CLAIMED input, all in
// one short transaction under the session's lock.
func (h *Handler) admit(ctx context.Context, ex *exchange) (refused *rpcError) {
	defer func() {
		if refused != nil {
			// Whatever refused it, a request not admitted is recorded
			// outside any session, under an ID of its own.
			ex.executionID, ex.session.ID = "", ""
		}
	}()
	sessionInput, sessionID, rerr := ex.server.resolveSession(ctx, ex.requestRecord())
	if rerr != nil {
		return rerr
	}
	ex.session = store.SessionKey{Account: ex.account, ServerID: ex.server.ActionID, ID: sessionID}
	ex.sessionInput = sessionInput
	ex.executionID = h.opts.IDs.New()
	var refusal *rpcError
	err := h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		refusal = nil
		session, _, err := tx.LockSession(ctx, ex.session, sessionInput)
		if err != nil {
			return err
		}
		if session.Closed() {
			refusal = newError(codeInvalidParams, errSessionClosed, http.StatusBadRequest, nil)
			return nil
		}
		if !jsonEqual(session.Input, sessionInput) {
			refusal = newError(codeInvalidParams, errSessionInvalid, http.StatusBadRequest, nil)
			return nil
		}
		if limit := ex.server.CallsPerMinute; limit > 0 {
			load, err := tx.SessionLoad(ctx, ex.session, time.Minute, limit)
			if err != nil {
				return err
			}
			if load.Used >= limit {
				retry := max(1, int(load.FreeAt.Sub(tx.Now()).Seconds()+0.999))
				refusal = newError(codeInvalidParams, errRateLimited, http.StatusTooManyRequests, map[string]any{"callsPerMinute": limit})
				refusal.Headers = map[string]string{"Retry-After": strconv.Itoa(retry)}
				return nil
			}
		}
		if err := tx.InsertExecution(ctx, ex.execution(store.RoleRequest, store.Running, nil, nil, nil)); err != nil {
			return err
		}
		_, err = tx.AppendSessionInput(ctx, ex.session, ex.executionID)
		return err
	})
	if errors.Is(err, store.ErrContention) {
		rerr := newError(codeInternal, errTransaction, http.StatusServiceUnavailable, map[string]any{"retryable": true})
		rerr.Headers = map[string]string{"Retry-After": "1"}
		return rerr
	}
	if err != nil {
		h.opts.Logger.Error("admit MCP request", "err", err)
		return newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
	}
	return refusal
}

// serveAdmitted admits the request, lets the SDK serve it into a buffer,
// commits the record, and only then sends the reply.
func (h *Handler) serveAdmitted(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if rerr := h.admit(r.Context(), ex); rerr != nil {
		h.refuse(w, r, ex, rerr)
		return
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
	if err := h.complete(ex, status, buffer); err != nil {
		h.opts.Logger.Error("record MCP request", "execution", ex.executionID, "err", err)
		rerr := newError(codeInternal, errNotRecorded, http.StatusInternalServerError, nil)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContention) {
			rerr = newError(codeInternal, errTransaction, http.StatusServiceUnavailable, map[string]any{"retryable": true})
		}
		h.recordUncommitted(ex, status, rerr, err)
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
// input CONSUMED. Nothing it wrote is applied and no use is recorded, since
// no output left. When this write fails too, the execution stays RUNNING,
// which claims no answer.
func (h *Handler) recordUncommitted(ex *exchange, status string, rerr *rpcError, cause error) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if status != store.Cancelled {
		status = store.Failed
	}
	request := ex.execution(store.RoleRequest, status, nil, rerr, nil)
	request.Output, _ = json.Marshal(map[string]any{"error": rerr.wire()})
	request.Invocation = ex.invocationJSON(rerr, map[string]any{"cause": cause.Error()})
	ctx := context.Background()
	err := h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		for _, call := range ex.calls {
			kept := *call
			if kept.RolledBackBy == "" {
				kept.RolledBackBy = ex.executionID
			}
			if err := tx.InsertExecution(ctx, &kept); err != nil {
				return err
			}
		}
		if err := tx.FinishExecution(ctx, request); err != nil {
			return err
		}
		return tx.ConsumeSessionInput(ctx, ex.session, ex.executionID, len(ex.calls))
	})
	if err != nil {
		h.opts.Logger.Error("record MCP request that did not commit", "execution", ex.executionID, "err", err)
	}
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

func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true // both are encodings of the same mapping, keys sorted
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ax, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(ax, by)
}

// bufferedResponse holds the SDK's reply until the record commits.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
	parsed *replyView
}

func newBufferedResponse() *bufferedResponse {
	return &bufferedResponse{header: http.Header{}, status: http.StatusOK}
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) Write(p []byte) (int, error) { return b.body.Write(p) }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }

// replaceWith makes the buffered reply a JSON-RPC error.
func (b *bufferedResponse) replaceWith(rerr *rpcError, id json.RawMessage) {
	b.header = http.Header{"Content-Type": []string{"application/json"}}
	b.status = rerr.Status
	b.body.Reset()
	b.body.Write(errorBody(id, rerr))
	b.parsed = nil
}

func (b *bufferedResponse) flushTo(w http.ResponseWriter) {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Length", strconv.Itoa(b.body.Len()))
	w.WriteHeader(b.status)
	w.Write(b.body.Bytes())
}

type replyView struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// reply is the buffered reply's result or error, decoded once.
func (b *bufferedResponse) reply() replyView {
	if b.parsed == nil {
		b.parsed = &replyView{}
		json.Unmarshal(b.body.Bytes(), b.parsed)
	}
	return *b.parsed
}

func (b *bufferedResponse) isJSONRPCError() bool { return len(b.reply().Error) > 0 }

// resultOrError is what the request answered, for its record.
func (b *bufferedResponse) resultOrError() json.RawMessage {
	v := b.reply()
	if len(v.Result) > 0 {
		return v.Result
	}
	if len(v.Error) > 0 {
		out, _ := json.Marshal(map[string]json.RawMessage{"error": v.Error})
		return out
	}
	if b.body.Len() == 0 {
		return nil
	}
	out, _ := json.Marshal(map[string]string{"raw": fmt.Sprintf("%.4096s", b.body.String())})
	return out
}

// invocationJSON is what the request recorded about itself, with the error
// it answered, when it failed. The caller holds ex.mu.
func (ex *exchange) invocationJSON(failure *rpcError, details any) json.RawMessage {
	invocation := make(map[string]any, len(ex.invocation)+1)
	for k, v := range ex.invocation {
		invocation[k] = v
	}
	if failure != nil {
		invocation["error"] = map[string]any{"code": failure.Name, "message": failure.message(), "details": details}
	}
	out, _ := json.Marshal(invocation)
	return out
}
