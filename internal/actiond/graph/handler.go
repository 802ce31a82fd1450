package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"regexp"

	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/clock"
)

// Path is where the API is served.
const Path = "/financial/v1/graphql"

// AccountHeader names the account a request runs in; DefaultAccount when
// absent.
const (
	AccountHeader  = "X-Twisp-Account-Id"
	DefaultAccount = auth.DefaultAccount
)

// MaxRequestBytes bounds a request body.
const MaxRequestBytes = 8 << 20

var accountID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Verifier checks a request's bearer token for an audience.
type Verifier interface {
	VerifyRequest(r *http.Request, audience string) (auth.Identity, error)
}

// Options configure the HTTP handler.
type Options struct {
	Store *store.Store
	// Verifier checks bearer tokens; nil refuses every token.
	Verifier Verifier
	// PublicURL is where clients reach actiond; GraphQL tokens must name
	// PublicURL + Path in aud (auth.GraphQLAudience).
	PublicURL string
	// LocalRoot makes a request without an Authorization header the local
	// root, allowed everything, when it comes from this machine as
	// auth.LocalCaller says: from loopback, under a loopback Host with the
	// served port, with no foreign Origin. Set it only while actiond
	// listens on loopback.
	LocalRoot bool
	Clock     clock.Clock
	// IDs is passed to every operation's Env.
	IDs    IDs
	Logger *slog.Logger
	// Natives describes the native tools the engine runs (Env.Natives).
	Natives NativeTools
	// Replayer reruns recorded MCP requests (Env.Replayer).
	Replayer Replayer
}

type handler struct {
	opts     Options
	audience string
}

// NewHandler serves POST /financial/v1/graphql. Each request is one
// transaction: its resolvers share one unit of work, applied with the
// request's record writes in one store.Write when no field failed; any
// error answers data: null and writes nothing.
func NewHandler(opts Options) http.Handler {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &handler{opts: opts, audience: auth.GraphQLAudience(opts.PublicURL)}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, badRequest("", "send GraphQL requests with POST"))
		return
	}
	if media, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || media != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, badRequest("", "send the request as application/json: {\"query\": ..., \"variables\": ..., \"operationName\": ...}"))
		return
	}
	who, access, ok := h.authenticate(w, r)
	if !ok {
		return
	}
	account := r.Header.Get(AccountHeader)
	if account == "" {
		account = DefaultAccount
	}
	if !accountID.MatchString(account) {
		writeError(w, http.StatusBadRequest, badRequest(AccountHeader, "%q is not an account ID", account))
		return
	}
	if who != nil && !who.HasAccount(account) {
		writeError(w, http.StatusForbidden, newError(CodeAccessDenied, "", fmt.Sprintf("account %s is not one of your token's accounts", account), nil))
		return
	}
	req, err := decodeRequest(w, r)
	if err != nil {
		status := http.StatusBadRequest
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, status, err)
		return
	}
	resp := h.serve(r.Context(), account, who, access, req)
	h.logInternal(resp)
	writeJSON(w, http.StatusOK, resp)
}

// authenticate decides who the request runs as: a GraphQL token's principal,
// or, without an Authorization header, the local root when allowed. It
// answers 401 itself otherwise, also for a token of another audience such
// as an MCP token (ACT-061).
func (h *handler) authenticate(w http.ResponseWriter, r *http.Request) (*auth.Identity, *Access, bool) {
	if len(r.Header.Values("Authorization")) == 0 {
		if h.opts.LocalRoot && auth.LocalCaller(r) {
			root := RootAccess()
			return nil, &root, true
		}
		unauthorized(w, false)
		return nil, nil, false
	}
	if h.opts.Verifier == nil {
		unauthorized(w, true)
		return nil, nil, false
	}
	who, err := h.opts.Verifier.VerifyRequest(r, h.audience)
	if err != nil {
		h.opts.Logger.Info("graphql: token refused", "reason", auth.ReasonOf(err), "error", err)
		unauthorized(w, auth.ReasonOf(err) != auth.ReasonMissing)
		return nil, nil, false
	}
	return &who, nil, true
}

// serve runs the request against a fresh unit of work and commits it.
func (h *handler) serve(ctx context.Context, account string, who *auth.Identity, access *Access, req Request) *Response {
	work := h.opts.Store.NewWork(account)
	if access == nil {
		principal, err := PrincipalAccess(ctx, work, who.Principal, who.Claims)
		if err != nil {
			return errorResponse(err)
		}
		access = &principal
	}
	env := Env{Store: h.opts.Store, Work: work, Account: account, Access: *access, Clock: h.opts.Clock, IDs: h.opts.IDs, RecordWrites: true, Natives: h.opts.Natives, Replayer: h.opts.Replayer}
	resp := run(ctx, env, req)
	if len(resp.Errors) > 0 || resp.DryRun || len(work.Writes()) == 0 && len(resp.Records) == 0 {
		return resp
	}
	err := h.opts.Store.Write(ctx, func(tx *store.Tx) error {
		if err := tx.Apply(ctx, work); err != nil {
			return err
		}
		return resp.ApplyRecords(ctx, tx)
	})
	if err != nil {
		return errorResponse(err)
	}
	return resp
}

func (h *handler) logInternal(resp *Response) {
	for _, e := range resp.Errors {
		if e.Extensions["code"] == CodeInternal {
			h.opts.Logger.Error("graphql: internal error", "path", e.Path.String(), "error", e.Message)
		}
	}
}

func decodeRequest(w http.ResponseWriter, r *http.Request) (Request, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Request{}, newError(CodeBadRequest, "", fmt.Sprintf("the request is larger than %d bytes", MaxRequestBytes), err)
		}
		return Request{}, badRequest("", "reading the request failed: %v", err)
	}
	var req Request
	decoder := json.NewDecoder(bytes.NewReader(body))
	decoder.UseNumber()
	if err := decoder.Decode(&req); err != nil {
		return Request{}, badRequest("", "the body is not a GraphQL request: %v", err)
	}
	if decoder.More() {
		return Request{}, badRequest("", "the body holds more than one JSON value")
	}
	if req.Query == "" {
		return Request{}, newError(CodeValidationFailed, "", "the request has no query", nil)
	}
	return req, nil
}

func unauthorized(w http.ResponseWriter, tokenRefused bool) {
	challenge := "Bearer"
	if tokenRefused {
		challenge += ` error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, newError("UNAUTHENTICATED", "", "a bearer token for this API is required: one whose aud is the GraphQL endpoint (an MCP token is not accepted here)", nil))
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, &Response{Errors: gqlerror.List{gqlError(nil, err)}})
}

func writeJSON(w http.ResponseWriter, status int, resp *Response) {
	body, err := json.Marshal(resp)
	if err != nil {
		body, _ = json.Marshal(&Response{Errors: gqlerror.List{gqlError(nil, err)}})
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
