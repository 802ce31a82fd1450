package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/store"
)

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
	values, sessionInput, sessionID, rerr := ex.server.resolveSession(ctx, ex.input)
	if rerr != nil {
		return rerr
	}
	ex.session = store.SessionKey{Account: ex.account, ServerID: ex.server.ActionID, ID: sessionID}
	ex.sessionInput, ex.sessionValues = sessionInput, values
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
			load, err := tx.SessionLoad(ctx, session, time.Minute, limit)
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
		running := ex.execution(store.RoleRequest, store.Running, nil, nil, nil)
		running.Owner = h.opts.Process
		if err := tx.InsertExecution(ctx, running); err != nil {
			return err
		}
		_, err = tx.AppendSessionInput(ctx, ex.session, ex.executionID)
		return err
	})
	if err != nil {
		// The admission may have committed though its answer was lost: the
		// request is settled FAILED once the database answers, if it is.
		h.settler.add(settleUnadmitted(ex.account, ex.executionID, err))
	}
	if errors.Is(err, store.ErrContention) {
		rerr := newError(codeInternal, errTransaction, http.StatusServiceUnavailable, map[string]any{"retryable": true})
		rerr.Headers = map[string]string{"Retry-After": "1"}
		rerr.Detail = err.Error()
		return rerr
	}
	if err != nil {
		h.opts.Logger.Error("admit MCP request", "err", err)
		rerr := newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
		rerr.Detail = err.Error()
		return rerr
	}
	return refusal
}

// resolveSession computes a request's session input, as values and
// encoded, and its id. A request whose record does not produce a valid
// session input is refused with 400.
func (s *Server) resolveSession(ctx context.Context, record map[string]any) (map[string]any, json.RawMessage, string, *rpcError) {
	// The server's mapping and why it failed are the owner's to read, on
	// the refusal's record; the client learns only that its request does
	// not carry what the server groups by.
	mismatched := func(err error) *rpcError {
		rerr := newError(codeInvalidParams, errRequestMismatched, http.StatusBadRequest, nil)
		rerr.Detail = err.Error()
		return rerr
	}
	input, err := s.Compiled.SessionInput(ctx, record)
	if err != nil {
		if errors.Is(err, action.ErrSessionInvalid) {
			return nil, nil, "", mismatched(err)
		}
		rerr := newError(codeInternal, errInternal, http.StatusInternalServerError, nil)
		rerr.Detail = err.Error()
		return nil, nil, "", rerr
	}
	id, err := s.Compiled.SessionID(ctx, input)
	if err != nil || id == "" {
		if err == nil {
			err = errors.New("session.id gave an empty string")
		}
		return nil, nil, "", mismatched(err)
	}
	raw, err := json.Marshal(input)
	if err != nil {
		return nil, nil, "", mismatched(err)
	}
	return input, raw, id, nil
}

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

// refuse answers a refusal that came after the token check, recording it —
// only the first of a principal and subject at a server each minute — as a
// FAILED execution of the server outside any session. It runs nothing.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, ex *exchange, rerr *rpcError) {
	h.meterRefused(rerr.Code)
	ex.trace.refused(ex, rerr)
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
	if rerr.Code == errSessionClosed && ex.req.Method == "tools/call" {
		result := toolError(rerr.Code, rerr.Message, rerr.Hint)
		annotate(ex.server, result)
		writeJSON(w, http.StatusOK, resultBody(ex.req.ID, ex.callResult(result)))
		return
	}
	rerr.write(w, ex.req.ID)
}
