package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/actiond/action"
	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// The record read without GraphQL: straight from the database actiond
// serve writes, which may be running meanwhile.

// recordFlags are what the record commands share.
type recordFlags struct {
	db      database
	account string
	asJSON  bool
}

func (f *recordFlags) register(cmd *cobra.Command) {
	f.db.register(cmd)
	cmd.Flags().StringVar(&f.account, "account", auth.DefaultAccount, "the account whose record to read")
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print as JSON")
}

// sessionRow is one session as `actiond sessions` shows it.
type sessionRow struct {
	Server    string          `json:"server"`
	ServerID  string          `json:"serverId"`
	ID        string          `json:"id"`
	Input     json.RawMessage `json:"input"`
	Requests  int             `json:"requests"`
	Calls     int             `json:"calls"`
	CreatedAt time.Time       `json:"createdAt"`
	LastAt    time.Time       `json:"lastRequestAt,omitzero"`
	Closed    bool            `json:"closed"`
}

func (a *app) sessionsCommand() *cobra.Command {
	var f recordFlags
	var serverName string
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the MCP servers' sessions, oldest first",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := f.db.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			rows, err := readSessions(ctx, st, f.account, serverName)
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeJSON(a.stdout, rows)
			}
			t := newTable(a.stdout, "SERVER", "SESSION", "REQUESTS", "CALLS", "CREATED", "LAST REQUEST", "STATE")
			for _, r := range rows {
				state := "open"
				if r.Closed {
					state = "closed"
				}
				t.row(r.Server, r.ID, fmt.Sprint(r.Requests), fmt.Sprint(r.Calls), stamp(r.CreatedAt), stamp(r.LastAt), state)
			}
			return t.flush(len(rows) == 0, "No sessions yet: an MCP server records one when a host first calls it.")
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&serverName, "server", "", "only this MCP server's sessions (its registry name)")
	_ = cmd.RegisterFlagCompletionFunc("server", completeServers(&f))
	return cmd
}

// serverID is the action ID of the MCP server of that name; a name no
// server has is an error, as a session no server has is.
func serverID(ctx context.Context, st *store.Store, account, name string) (string, error) {
	stored, err := registry.ActionByName(ctx, st.NewWork(account), name)
	if errors.Is(err, registry.ErrNotFound) || err == nil && stored.Definition.Kind != action.KindMCP {
		return "", coded.New(codeNoSuchServer, "no MCP server is named %q in account %s", name, account).
			WithHint("`actiond sessions` lists the servers that have sessions; `actiond completion` completes their names.")
	}
	if err != nil {
		return "", err
	}
	return stored.ID, nil
}

// sessionExists refuses a session ID no server (or not the given one) has,
// rather than print an empty list as if it had made no requests yet.
func sessionExists(ctx context.Context, st *store.Store, account, serverID, session string) error {
	found := false
	err := st.Read(ctx, func(tx *store.Tx) error {
		sessions, err := tx.Sessions(ctx, account, serverID)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			found = found || s.ID == session
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !found {
		where := "in account " + account
		if serverID != "" {
			where = "of that server"
		}
		return coded.New(codeNoSuchSession, "no session %q %s", session, where).
			WithHint("`actiond sessions` lists the sessions.")
	}
	return nil
}

// serverIDOrAll is serverID, or "" (every server) for no name.
func serverIDOrAll(ctx context.Context, st *store.Store, account, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	return serverID(ctx, st, account, name)
}

// Codes of what the record commands cannot find.
const (
	codeNoSuchServer    = "no_such_server"
	codeNoSuchSession   = "no_such_session"
	codeNoSuchExecution = "no_such_execution"
	codeAmbiguousID     = "ambiguous_execution_id"
)

func readSessions(ctx context.Context, st *store.Store, account, serverName string) ([]sessionRow, error) {
	serverID, err := serverIDOrAll(ctx, st, account, serverName)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	var rows []sessionRow
	err = st.Read(ctx, func(tx *store.Tx) error {
		sessions, err := tx.Sessions(ctx, account, serverID)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			inputs, err := tx.SessionInputs(ctx, store.SessionKey{Account: account, ServerID: s.ServerID, ID: s.ID})
			if err != nil {
				return err
			}
			row := sessionRow{ServerID: s.ServerID, ID: s.ID, Input: s.Input, CreatedAt: s.CreatedAt, Closed: s.Closed(), Requests: len(inputs)}
			for _, in := range inputs {
				row.Calls += in.Calls
				if in.AdmittedAt.After(row.LastAt) {
					row.LastAt = in.AdmittedAt
				}
			}
			rows = append(rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range rows {
		id := rows[i].ServerID
		if _, known := names[id]; !known {
			names[id] = id
			if stored, err := registry.Action(ctx, st.NewWork(account), id, 0); err == nil {
				names[id] = stored.Definition.Name
			}
		}
		rows[i].Server = names[id]
	}
	return rows, nil
}

// executionRow is one request as `actiond executions` shows it.
type executionRow struct {
	ID            string `json:"id"`
	Server        string `json:"server"`
	ServerVersion int64  `json:"serverVersion"`
	Role          string `json:"role"`
	Method        string `json:"method,omitempty"`
	Tool          string `json:"tool,omitempty"`
	Intent        string `json:"intent,omitempty"`
	// Status is how the request ended for its client: TOOL_ERROR for a
	// result with isError, which the record keeps as RecordedStatus
	// (SUCCEEDED: Twisp answered with a result).
	Status         string         `json:"status"`
	RecordedStatus string         `json:"recordedStatus,omitempty"`
	ToolError      *recordedError `json:"toolError,omitempty"`
	// For a call or a task: the action it ran, the request it is beneath
	// (or that started it), and the call that made it when that is not the
	// request itself.
	Action     *actionRef      `json:"action,omitempty"`
	Request    *callRef        `json:"request,omitempty"`
	CalledBy   *callRef        `json:"calledBy,omitempty"`
	Principal  string          `json:"principal"`
	Subject    string          `json:"subject"`
	Client     string          `json:"client"`
	SessionID  string          `json:"sessionId,omitempty"`
	Preview    bool            `json:"preview"`
	StartedAt  time.Time       `json:"startedAt"`
	EndedAt    time.Time       `json:"endedAt,omitzero"`
	DurationMS *int64          `json:"durationMs,omitempty"`
	Error      *recordedError  `json:"error,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	Calls      []*callNode     `json:"calls,omitempty"`
}

// recordedError is an execution's error as the record keeps it.
type recordedError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"`
}

// callNode is one call of the call tree.
type callNode struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Version      int64           `json:"version"`
	Status       string          `json:"status"`
	Preview      bool            `json:"preview"`
	DurationMS   *int64          `json:"durationMs,omitempty"`
	Error        *recordedError  `json:"error,omitempty"`
	RolledBackBy string          `json:"rolledBackBy,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	WriteSet     []store.Write   `json:"writeSet,omitempty"`
	Calls        []*callNode     `json:"calls,omitempty"`
}

// actionRef names the action a call or a task ran.
type actionRef struct {
	Name    string `json:"name"`
	Version int64  `json:"version"`
	Native  bool   `json:"native,omitempty"`
}

// callRef names an execution a call or a task hangs from.
type callRef struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Method string `json:"method,omitempty"`
	Tool   string `json:"tool,omitempty"`
}

func requestRow(e *store.Execution) executionRow {
	row := executionRow{
		ID: e.ID, Server: e.ActionName, ServerVersion: e.ActionVersion, Role: e.Role, Status: store.Outcome(e),
		Principal: e.Caller, Subject: e.Subject, Client: e.Client, SessionID: e.SessionID, Preview: e.Preview,
		StartedAt: e.StartedAt, EndedAt: e.EndedAt, DurationMS: duration(e), Error: errorOf(e.Error),
	}
	if failure := store.RecordedToolError(e); failure != nil {
		row.ToolError = &recordedError{Code: failure.Code, Message: failure.Message}
	}
	if row.Status != e.Status {
		row.RecordedStatus = e.Status
	}
	var input struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(e.Input, &input) // a request too large to record keeps a prefix
	row.Method, row.Tool = input.Method, input.Params.Name
	var invocation struct {
		Intent string `json:"intent"`
	}
	_ = json.Unmarshal(e.Invocation, &invocation)
	row.Intent = invocation.Intent
	return row
}

func duration(e *store.Execution) *int64 {
	if e.EndedAt.IsZero() {
		return nil
	}
	ms := e.EndedAt.Sub(e.StartedAt).Milliseconds()
	return &ms
}

func errorOf(raw json.RawMessage) *recordedError {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var e recordedError
	if err := json.Unmarshal(raw, &e); err != nil || (e.Code == "" && e.Message == "") {
		return &recordedError{Message: string(raw)}
	}
	return &e
}

func finished(e *store.Execution) bool {
	switch e.Status {
	case store.Queued, store.Running, store.Accepted, store.RetryScheduled:
		return false
	}
	return true
}

func (a *app) executionsCommand() *cobra.Command {
	var f recordFlags
	var session, serverName string
	var follow bool
	var limit int
	cmd := &cobra.Command{
		Use:   "executions",
		Short: "List the requests MCP servers served, oldest first",
		Long: "List the requests MCP servers served and refused, oldest first: the last\n" +
			"--limit of them, then, with --follow, each new one once it has finished.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usagef("--limit must be at least 1, not %d", limit)
			}
			ctx := cmd.Context()
			st, err := f.db.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			filter := store.ExecutionFilter{Account: f.account, SessionID: session}
			if serverName != "" {
				id, err := serverID(ctx, st, f.account, serverName)
				if err != nil {
					return err
				}
				filter.ActionID = id
			}
			if session != "" {
				if err := sessionExists(ctx, st, f.account, filter.ActionID, session); err != nil {
					return err
				}
			}
			lister := &requestLister{st: st, filter: filter}
			first, err := lister.next(ctx)
			if err != nil {
				return err
			}
			if len(first) > limit {
				first = first[len(first)-limit:]
			}
			out := newRequestPrinter(a, f.asJSON, follow)
			if err := out.print(first); err != nil {
				return err
			}
			if !follow {
				return out.done()
			}
			return a.follow(ctx, lister, out)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&session, "session", "", "only this session's requests")
	cmd.Flags().StringVar(&serverName, "server", "", "only this MCP server's requests (its registry name)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new requests as they finish, until interrupted")
	cmd.Flags().IntVar(&limit, "limit", 50, "how many of the latest requests to print first")
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessions(&f))
	_ = cmd.RegisterFlagCompletionFunc("server", completeServers(&f))
	return cmd
}

// followInterval is how often --follow looks for new requests.
const followInterval = 500 * time.Millisecond

func (a *app) follow(ctx context.Context, lister *requestLister, out *requestPrinter) error {
	ticker := a.clock.NewTicker(followInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
		rows, err := lister.next(ctx)
		if err != nil {
			return err
		}
		if err := out.print(rows); err != nil {
			return err
		}
	}
}

// requestLister reads the requests recorded since it last looked, holding
// back those still running until they finish.
type requestLister struct {
	st      *store.Store
	filter  store.ExecutionFilter
	pending []*store.Execution
}

func (l *requestLister) next(ctx context.Context) ([]*store.Execution, error) {
	var ready []*store.Execution
	err := l.st.Read(ctx, func(tx *store.Tx) error {
		var still []*store.Execution
		for _, p := range l.pending {
			current, err := tx.Execution(ctx, l.filter.Account, p.ID)
			if err != nil {
				return err
			}
			if finished(current) {
				ready = append(ready, current)
			} else {
				still = append(still, current)
			}
		}
		l.pending = still
		for _, role := range []string{store.RoleRequest, store.RoleRefusal} {
			f := l.filter
			f.Role = role
			list, err := tx.Executions(ctx, f)
			if err != nil {
				return err
			}
			for _, e := range list {
				if finished(e) {
					ready = append(ready, e)
				} else {
					l.pending = append(l.pending, e)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, e := range ready {
		l.filter.AfterSeq = max(l.filter.AfterSeq, e.Seq)
	}
	for _, e := range l.pending {
		l.filter.AfterSeq = max(l.filter.AfterSeq, e.Seq)
	}
	sort.Slice(ready, func(i, j int) bool { return ready[i].Seq < ready[j].Seq })
	return ready, nil
}

// requestPrinter prints requests as a table, a JSON array, or (following)
// JSON lines or a stream of rows aligned to the header.
type requestPrinter struct {
	a       *app
	asJSON  bool
	follow  bool
	t       *table
	s       *stream
	rows    []executionRow
	printed int
}

// requestColumns are the columns of `actiond executions`, and the least
// width each has when followed: an execution ID, a time, and room for
// the longest method, status and duration a request commonly has.
var (
	requestColumns = []string{"EXECUTION", "STARTED", "SERVER", "METHOD", "TOOL", "SUBJECT", "STATUS", "DURATION", "SESSION"}
	followWidths   = []int{36, 19, 16, 15, 16, 12, 16, 8, 0}
)

func newRequestPrinter(a *app, asJSON, follow bool) *requestPrinter {
	p := &requestPrinter{a: a, asJSON: asJSON, follow: follow}
	switch {
	case asJSON:
	case follow:
		p.s = newStream(a.stdout, requestColumns, followWidths)
	default:
		p.t = newTable(a.stdout, requestColumns...)
	}
	return p
}

func (p *requestPrinter) print(list []*store.Execution) error {
	for _, e := range list {
		row := requestRow(e)
		p.printed++
		switch {
		case p.asJSON && p.follow:
			line, err := json.Marshal(row)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.a.stdout, "%s\n", line); err != nil {
				return err
			}
		case p.asJSON:
			p.rows = append(p.rows, row)
		default:
			cells := []string{row.ID, stamp(row.StartedAt), row.Server, row.Method, orDash(row.Tool), row.Subject, statusText(row), millis(row.DurationMS, row.Status), orDash(row.SessionID)}
			if p.s != nil {
				p.s.row(cells...)
			} else {
				p.t.row(cells...)
			}
		}
	}
	if p.s != nil {
		return p.s.flush()
	}
	return nil
}

// statusText is a request's status as the tables show it.
func statusText(row executionRow) string {
	status := row.Status
	if row.Role == store.RoleRefusal {
		status += " (refused)"
	}
	return status
}

func (p *requestPrinter) done() error {
	if p.asJSON {
		if p.rows == nil {
			p.rows = []executionRow{}
		}
		return writeJSON(p.a.stdout, p.rows)
	}
	return p.t.flush(p.printed == 0, "No requests recorded yet.")
}

func errorText(e *recordedError) string {
	text := e.Message
	if e.Code != "" {
		text = e.Code + ": " + text
	}
	return strings.ReplaceAll(text, "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// millis is how long an execution took; one without an end is running,
// unless its status says it ended (a refusal records no end).
func millis(ms *int64, status string) string {
	if ms != nil {
		return (time.Duration(*ms) * time.Millisecond).String()
	}
	switch status {
	case store.Queued, store.Running, store.Accepted, store.RetryScheduled:
		return "running"
	}
	return "-"
}
