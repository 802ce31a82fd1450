package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/engine"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// exchange is one request, as every step after its decoding reads it: who
// asked and what, the server as the request sees it, and, once admitted,
// its execution and session. It is set as the request is admitted and not
// changed after; what the method serving it does goes into the request's
// record, a value of its own.
type exchange struct {
	h       *Handler
	account string
	who     *auth.Identity
	req     *rpcRequest
	body    []byte
	server  *Server
	started time.Time

	executionID string
	session     store.SessionKey
	// sessionInput is the session's input, fixed when it was created, as
	// stored and as the fixed input reads it.
	sessionInput  json.RawMessage
	sessionValues map[string]any
	// input is execution.input, the request as recorded: as values for
	// the server's expressions, and encoded for the record.
	input     map[string]any
	inputJSON json.RawMessage
	// tasks, in a replay, takes the endpoint's tasks' place: it starts and
	// cancels nothing.
	tasks engine.Tasks
	// trace is the request's span, nil when tracing is off.
	trace *requestTrace
}

// record is what a request did, which its completion records beside its
// status and answer: the calls it made, the uses of what they produced,
// what it noted in its invocation, its writes, the tasks it started, and
// the platform error it answered with. The method serving the request
// fills it; the completion reads it once the method returned.
type record struct {
	calls      []*store.Execution
	uses       []store.Use
	invocation invocation
	work       *store.Work
	// tasks the request started: cancelled, never run, when its record
	// does not commit, since its client never learns of them.
	tasks   []string
	failure *rpcError
}

// invocation is what a request's execution records of how it was served,
// besides its input and output. The members are in the order of their
// names, as the record has always listed them.
type invocation struct {
	// Claims are the token's, which a replay evaluates the original
	// principal's policies with.
	Claims map[string]any `json:"claims,omitempty"`
	Error  map[string]any `json:"error,omitempty"`
	Intent string         `json:"intent,omitempty"`
	// Output is what the method answered, as a reader of the record needs
	// it: whether a call's result was an error, the status a poll
	// returned, what a load read.
	Output    any               `json:"output,omitempty"`
	Skills    []offeredSkill    `json:"skills,omitzero"`
	Templates []offeredTemplate `json:"templates,omitzero"`
	Tools     []offeredTool     `json:"tools,omitzero"`
}

// The versions a listing offered.
type (
	offeredTool struct {
		Name     string `json:"name"`
		ActionID string `json:"actionId"`
		Version  int    `json:"version"`
		Native   bool   `json:"native"`
	}
	offeredSkill struct {
		Name     string `json:"name"`
		ActionID string `json:"actionId"`
		Version  int    `json:"version"`
		URI      string `json:"uri"`
	}
	offeredTemplate struct {
		URITemplate string `json:"uriTemplate"`
		Tool        string `json:"tool"`
		ActionID    string `json:"actionId"`
		Version     int    `json:"version"`
	}
)

func (rec *record) addCalls(calls []*store.Execution) { rec.calls = append(rec.calls, calls...) }

func (rec *record) addUse(u store.Use) { rec.uses = append(rec.uses, u) }

func (rec *record) fail(rerr *rpcError) *rpcError {
	rec.failure = rerr
	return rerr
}

// deadline bounds a request by the server's response timeout.
func (ex *exchange) deadline() time.Duration {
	if ex.server.ResponseTimeout > 0 {
		return ex.server.ResponseTimeout
	}
	return time.Minute
}

// deadlineError is a request that passed its server's response timeout.
func (ex *exchange) deadlineError() *rpcError {
	return newError(codeInternal, errDeadline, http.StatusInternalServerError,
		map[string]any{"responseTimeout": int(ex.deadline().Seconds())})
}

// serveAdmitted admits the request, serves it — the stateless methods
// here, discovery and the handshake through the SDK — commits its record,
// and only then sends the answer.
func (h *Handler) serveAdmitted(w http.ResponseWriter, r *http.Request, ex *exchange) {
	if rerr := h.admit(r.Context(), ex); rerr != nil {
		h.refuse(w, r, ex, rerr)
		return
	}
	rec := &record{}
	// A replay evaluates the original principal's policies with the
	// original request's claims: those it needs (replayClaims).
	if claims := replayClaims(ex.who.Claims, ex.server); len(claims) > 0 {
		rec.invocation.Claims = claims
	}
	// The work runs under the request's own context bounded by the
	// response timeout, so that a client going away stops it and a passed
	// deadline is answered.
	ctx, cancel := context.WithTimeout(r.Context(), ex.deadline())
	defer cancel()
	var rep *reply
	if answersItself(ex.req.Method) {
		rep = h.answer(ctx, ex, rec, r.Header)
	} else {
		rep = h.servers.serve(r, ex)
	}

	status := store.Succeeded
	switch {
	case r.Context().Err() != nil:
		status = store.Cancelled
	case len(rep.body) == 0 && rep.status != http.StatusAccepted:
		// Nothing was answered: never send an empty 200.
		h.opts.Logger.Error("the MCP request was answered with nothing", "execution", ex.executionID, "method", ex.req.Method)
		rep = ex.errorReply(rec.fail(newError(codeInternal, errInternal, http.StatusInternalServerError, nil)))
		status = store.Failed
	case rec.failure != nil || !rep.succeeded():
		status = store.Failed
	}
	err := h.complete(ex, rec, status, rep)
	traced := status
	if err != nil {
		traced = store.Failed // the client is told of the failure to record
	}
	ex.trace.recorded(ex, traced, rec.calls)
	if err != nil {
		h.opts.Logger.Error("record MCP request", "execution", ex.executionID, "err", err)
		rerr := newError(codeInternal, errNotRecorded, http.StatusInternalServerError, nil)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrContention) {
			rerr = newError(codeInternal, errTransaction, http.StatusServiceUnavailable, map[string]any{"retryable": true})
		}
		if h.recordUncommitted(ex, rec, status, rerr, err) {
			// The completion had committed though its answer was lost:
			// the result is recorded, so it may leave.
			if status != store.Cancelled {
				rep.send(w)
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
	rep.send(w)
}

// complete records the outcome in one transaction: the request's status and
// output, its calls with their write sets, its uses, the session input
// CONSUMED with its call count, and — on a LIVE server — the writes.
func (h *Handler) complete(ex *exchange, rec *record, status string, rep *reply) error {
	ctx := context.Background()
	request := ex.execution(store.RoleRequest, status, nil, rec.failure, nil)
	request.Output = rep.output()
	if status == store.Failed && rec.failure == nil {
		request.Error = rep.rpcError
	}
	request.Invocation = rec.invocationJSON(rec.failure, nil)
	return h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		if rec.work != nil && !ex.server.Preview && status == store.Succeeded {
			if err := tx.Apply(ctx, rec.work); err != nil {
				return err
			}
		}
		if err := tx.InsertExecutions(ctx, rec.calls); err != nil {
			return err
		}
		if err := tx.FinishExecution(ctx, request); err != nil {
			return err
		}
		if err := tx.AddUses(ctx, ex.executionID, rec.uses); err != nil {
			return err
		}
		return tx.ConsumeSessionInput(ctx, ex.session, ex.executionID, len(rec.calls))
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
// answer may be sent.
func (h *Handler) recordUncommitted(ex *exchange, rec *record, status string, rerr *rpcError, cause error) (committed bool) {
	if status != store.Cancelled {
		status = store.Failed
	}
	request := ex.execution(store.RoleRequest, status, nil, rerr, nil)
	request.Output, _ = json.Marshal(map[string]any{"error": rerr.wire()})
	request.Invocation = rec.invocationJSON(rerr, map[string]any{"cause": cause.Error()})
	calls := make([]*store.Execution, len(rec.calls))
	for i, call := range rec.calls {
		kept := *call
		if kept.RolledBackBy == "" {
			kept.RolledBackBy = ex.executionID
		}
		calls[i] = &kept
	}
	started := rec.tasks
	by, _ := json.Marshal(engine.CancelledBy{Principal: ex.who.Principal, Subject: ex.who.Subject, ExecutionID: ex.executionID})
	write := func(ctx context.Context, tx *store.Tx) error {
		final := *request
		if err := tx.FinishExecution(ctx, &final); err != nil {
			return err
		}
		if err := tx.InsertExecutions(ctx, calls); err != nil {
			return err
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
	h.settler.add(write)
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

// requestInput is execution.input: the request as the client sent it, with
// who asked taken from the verified token, never from the body. Its members
// are in the order of their names, as the record has always listed them.
type requestInput struct {
	Client          string          `json:"client"`
	ID              json.RawMessage `json:"id"`
	JSONRPC         string          `json:"jsonrpc"`
	Method          string          `json:"method"`
	Params          json.RawMessage `json:"params"`
	Principal       string          `json:"principal"`
	ProtocolVersion string          `json:"protocolVersion"`
	Subject         string          `json:"subject"`
	Truncated       string          `json:"truncated,omitempty"`
}

// setInput sets execution.input, as values and as the record keeps it.
func (ex *exchange) setInput() {
	var params any
	if ex.req.params != nil {
		params = ex.req.params
	}
	var id any
	if len(ex.req.ID) > 0 {
		json.Unmarshal(ex.req.ID, &id)
	}
	ex.input = map[string]any{
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
		ex.input["truncated"] = ex.req.truncated
	}
	recorded := requestInput{
		Client: ex.who.Client, ID: ex.req.ID, JSONRPC: "2.0", Method: ex.req.Method, Params: ex.req.recordedParams(),
		Principal: ex.who.Principal, ProtocolVersion: ex.req.version, Subject: ex.who.Subject, Truncated: ex.req.truncated,
	}
	if len(recorded.ID) == 0 {
		recorded.ID = json.RawMessage("null")
	}
	if recorded.Params == nil {
		recorded.Params = json.RawMessage("null")
	}
	ex.inputJSON, _ = json.Marshal(recorded)
}

// execution builds the record of the request itself.
func (ex *exchange) execution(role, status string, output json.RawMessage, rerr *rpcError, details map[string]any) *store.Execution {
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
		Input:         ex.inputJSON,
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
// it answered, when it failed.
func (rec *record) invocationJSON(failure *rpcError, details any) json.RawMessage {
	invocation := rec.invocation
	if failure != nil {
		invocation.Error = failure.invocationEntry(details)
	}
	out, _ := json.Marshal(invocation)
	return out
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
