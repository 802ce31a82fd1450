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

	"github.com/incusspawn/isx/internal/actiond/auth"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
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
	return cmd
}

func readSessions(ctx context.Context, st *store.Store, account, serverName string) ([]sessionRow, error) {
	serverID := ""
	if serverName != "" {
		stored, err := registry.ActionByName(ctx, st.NewWork(account), serverName)
		if errors.Is(err, registry.ErrNotFound) {
			return nil, fmt.Errorf("no MCP server is named %q in account %s", serverName, account)
		}
		if err != nil {
			return nil, err
		}
		serverID = stored.ID
	}
	names := map[string]string{}
	var rows []sessionRow
	err := st.Read(ctx, func(tx *store.Tx) error {
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
	ID            string          `json:"id"`
	Server        string          `json:"server"`
	ServerVersion int64           `json:"serverVersion"`
	Role          string          `json:"role"`
	Method        string          `json:"method"`
	Tool          string          `json:"tool,omitempty"`
	Intent        string          `json:"intent,omitempty"`
	Status        string          `json:"status"`
	Principal     string          `json:"principal"`
	Subject       string          `json:"subject"`
	Client        string          `json:"client"`
	SessionID     string          `json:"sessionId,omitempty"`
	Preview       bool            `json:"preview"`
	StartedAt     time.Time       `json:"startedAt"`
	EndedAt       time.Time       `json:"endedAt,omitzero"`
	DurationMS    *int64          `json:"durationMs,omitempty"`
	Error         *recordedError  `json:"error,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Output        json.RawMessage `json:"output,omitempty"`
	Calls         []*callNode     `json:"calls,omitempty"`
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

func requestRow(e *store.Execution) executionRow {
	row := executionRow{
		ID: e.ID, Server: e.ActionName, ServerVersion: e.ActionVersion, Role: e.Role, Status: e.Status,
		Principal: e.Caller, Subject: e.Subject, Client: e.Client, SessionID: e.SessionID, Preview: e.Preview,
		StartedAt: e.StartedAt, EndedAt: e.EndedAt, DurationMS: duration(e), Error: errorOf(e.Error),
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
				stored, err := registry.ActionByName(ctx, st.NewWork(f.account), serverName)
				if err != nil {
					return fmt.Errorf("no MCP server is named %q in account %s", serverName, f.account)
				}
				filter.ActionID = stored.ID
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
// JSON lines.
type requestPrinter struct {
	a       *app
	asJSON  bool
	follow  bool
	t       *table
	rows    []executionRow
	printed int
}

func newRequestPrinter(a *app, asJSON, follow bool) *requestPrinter {
	p := &requestPrinter{a: a, asJSON: asJSON, follow: follow}
	if !asJSON {
		p.t = newTable(a.stdout, "EXECUTION", "STARTED", "SERVER", "METHOD", "TOOL", "SUBJECT", "STATUS", "DURATION", "SESSION")
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
			status := row.Status
			if row.Role == store.RoleRefusal {
				status += " (refused)"
			}
			p.t.row(row.ID, stamp(row.StartedAt), row.Server, row.Method, orDash(row.Tool), row.Subject, status, millis(row.DurationMS), orDash(row.SessionID))
		}
	}
	if p.t != nil && p.follow {
		// Following, each batch is aligned on its own: a table cannot wait
		// for rows that have not happened.
		return p.t.flush(false, "")
	}
	return nil
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

func (a *app) executionCommand() *cobra.Command {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "execution ID",
		Short: "Show one request with its call tree",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("execution takes one execution ID, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: completeExecutions(&f),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := f.db.openExisting(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			row, err := readExecution(ctx, st, f.account, args[0])
			if err != nil {
				return err
			}
			if f.asJSON {
				return writeJSON(a.stdout, row)
			}
			return printExecution(a.stdout, row)
		},
	}
	f.register(cmd)
	return cmd
}

func readExecution(ctx context.Context, st *store.Store, account, id string) (*executionRow, error) {
	var row executionRow
	err := st.Read(ctx, func(tx *store.Tx) error {
		e, err := tx.Execution(ctx, account, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no execution %s in account %s; `actiond executions` lists them", id, account)
		}
		if err != nil {
			return err
		}
		row = requestRow(e)
		row.Input, row.Output = e.Input, e.Output
		row.Calls, err = callTree(ctx, tx, account, id, 0)
		return err
	})
	return &row, err
}

// maxDepth bounds the call tree a record can make the command walk.
const maxDepth = 32

func callTree(ctx context.Context, tx *store.Tx, account, parent string, depth int) ([]*callNode, error) {
	if depth >= maxDepth {
		return nil, nil
	}
	children, err := tx.Executions(ctx, store.ExecutionFilter{Account: account, ParentID: parent})
	if err != nil {
		return nil, err
	}
	var nodes []*callNode
	for _, c := range children {
		node := &callNode{ID: c.ID, Name: c.ActionName, Version: c.ActionVersion, Status: c.Status, Preview: c.Preview,
			DurationMS: duration(c), Error: errorOf(c.Error), RolledBackBy: c.RolledBackBy, Input: c.Input, Output: c.Output, WriteSet: c.WriteSet}
		if node.Calls, err = callTree(ctx, tx, account, c.ID, depth+1); err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

func printExecution(w interface{ Write([]byte) (int, error) }, row *executionRow) error {
	fields := newTable(w)
	fields.row("Execution", row.ID)
	fields.row("Server", fmt.Sprintf("%s (version %d)", row.Server, row.ServerVersion))
	method := row.Method
	if row.Tool != "" {
		method += " " + row.Tool
	}
	fields.row("Request", method)
	if row.Intent != "" {
		fields.row("Intent", row.Intent)
	}
	fields.row("Subject", fmt.Sprintf("%s (principal %s, client %s)", row.Subject, row.Principal, orDash(row.Client)))
	fields.row("Session", orDash(row.SessionID))
	status := row.Status
	if row.Role == store.RoleRefusal {
		status += " (refused)"
	}
	if row.Preview {
		status += ", preview"
	}
	fields.row("Status", status)
	fields.row("Started", stamp(row.StartedAt)+", took "+millis(row.DurationMS))
	if row.Error != nil {
		fields.row("Error", errorText(row.Error))
	}
	if err := fields.flush(false, ""); err != nil {
		return err
	}
	if len(row.Calls) == 0 {
		_, err := fmt.Fprintln(w, "\nNo calls.")
		return err
	}
	if _, err := fmt.Fprintln(w, "\nCalls:"); err != nil {
		return err
	}
	tree := newTable(w, "CALL", "STATUS", "DURATION", "EXECUTION")
	var walk func(nodes []*callNode, depth int)
	walk = func(nodes []*callNode, depth int) {
		for _, n := range nodes {
			status := n.Status
			if n.RolledBackBy != "" {
				status += " (rolled back)"
			}
			if n.Preview {
				status += ", preview"
			}
			tree.row(strings.Repeat("  ", depth)+n.Name, status, millis(n.DurationMS), n.ID)
			if n.Error != nil {
				tree.row(strings.Repeat("  ", depth+1)+"error: "+errorText(n.Error), "", "", "")
			}
			walk(n.Calls, depth+1)
		}
	}
	walk(row.Calls, 0)
	return tree.flush(false, "")
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

func millis(ms *int64) string {
	if ms == nil {
		return "running"
	}
	return (time.Duration(*ms) * time.Millisecond).String()
}
