package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

func (a *app) executionCommand() *cobra.Command {
	var f recordFlags
	cmd := &cobra.Command{
		Use:   "execution ID",
		Short: "Show one request, or one call beneath it, with its call tree",
		Long: "Show one execution: a request with its call tree, or a call or a task with the\n" +
			"request it is beneath and its own calls. ID may be the first characters of an\n" +
			"execution ID, as long as no other starts with them.",
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

// idPrefix is what may begin an execution ID: its lowercase hex digits and
// hyphens.
var idPrefix = regexp.MustCompile(`^[0-9a-f-]{1,36}$`)

// candidatesShown bounds the IDs an ambiguous prefix lists.
const candidatesShown = 10

// resolveID finds the one execution whose ID is given, or begins with
// what is given.
func resolveID(ctx context.Context, tx *store.Tx, account, given string) (string, error) {
	prefix := strings.ToLower(given)
	notFound := coded.New(codeNoSuchExecution, "no execution %s in account %s", given, account).
		WithHint("`actiond executions` lists them; an ID may be shortened to its first characters.")
	if !idPrefix.MatchString(prefix) {
		return "", notFound
	}
	ids, err := tx.ExecutionIDsByPrefix(ctx, account, prefix, candidatesShown+1)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		if id == prefix {
			return id, nil
		}
	}
	switch len(ids) {
	case 0:
		return "", notFound
	case 1:
		return ids[0], nil
	}
	var lines []string
	for i, id := range ids {
		if i == candidatesShown {
			lines = append(lines, "  …")
			break
		}
		line := "  " + id
		if e, err := tx.Execution(ctx, account, id); err == nil {
			line += "  " + describe(e)
		}
		lines = append(lines, line)
	}
	return "", coded.New(codeAmbiguousID, "%d executions begin with %s:\n%s", len(ids), given, strings.Join(lines, "\n")).
		WithHint("Give more of the ID.")
}

// describe says in a few words what an execution is, for a list of
// candidates.
func describe(e *store.Execution) string {
	if e.Role == store.RoleRequest || e.Role == store.RoleRefusal || e.Role == store.RoleReplay {
		row := requestRow(e)
		return strings.TrimSpace(fmt.Sprintf("%s %s %s %s", e.Role, row.Server, row.Method, row.Tool))
	}
	return e.Role + " " + e.ActionName
}

func readExecution(ctx context.Context, st *store.Store, account, given string) (*executionRow, error) {
	var row executionRow
	err := st.Read(ctx, func(tx *store.Tx) error {
		id, err := resolveID(ctx, tx, account, given)
		if err != nil {
			return err
		}
		e, err := tx.Execution(ctx, account, id)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no execution %s in account %s; `actiond executions` lists them", id, account)
		}
		if err != nil {
			return err
		}
		row = requestRow(e)
		row.Input, row.Output = e.Input, e.Output
		if e.Role == store.RoleCall || e.Role == store.RoleTask {
			if err := place(ctx, tx, account, e, &row); err != nil {
				return err
			}
		}
		row.Calls, err = callTree(ctx, tx, account, id, 0)
		return err
	})
	return &row, err
}

// place tells what a call or a task is: the action it ran, the call it
// was made by when that is not the request, and the request it is beneath
// (a task's: the request that started it), whose server and session it
// served.
func place(ctx context.Context, tx *store.Tx, account string, e *store.Execution, row *executionRow) error {
	row.Action = &actionRef{Name: e.ActionName, Version: e.ActionVersion, Native: strings.HasPrefix(e.ActionID, "native:")}
	// A call's input is its tool's, not a JSON-RPC request.
	row.Server, row.ServerVersion, row.Method, row.Tool, row.Intent = "", 0, "", "", ""
	current := e
	for depth := 0; depth < maxDepth; depth++ {
		up := current.ParentID
		if up == "" {
			up = current.StartedBy
		}
		if up == "" {
			return nil
		}
		parent, err := tx.Execution(ctx, account, up)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		switch parent.Role {
		case store.RoleRequest, store.RoleReplay:
			request := requestRow(parent)
			row.Request = &callRef{ID: parent.ID, Method: request.Method, Tool: request.Tool}
			row.Server, row.ServerVersion = parent.ActionName, parent.ActionVersion
			if row.SessionID == "" {
				row.SessionID = parent.SessionID
			}
			return nil
		}
		if depth == 0 {
			row.CalledBy = &callRef{ID: parent.ID, Name: parent.ActionName}
		}
		current = parent
	}
	return nil
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
	if row.Action != nil {
		placeFields(fields, row)
	} else {
		fields.row("Server", fmt.Sprintf("%s (version %d)", row.Server, row.ServerVersion))
		method := row.Method
		if row.Tool != "" {
			method += " " + row.Tool
		}
		fields.row("Request", method)
	}
	if row.Intent != "" {
		fields.row("Intent", row.Intent)
	}
	fields.row("Subject", fmt.Sprintf("%s (principal %s, client %s)", row.Subject, row.Principal, orDash(row.Client)))
	fields.row("Session", orDash(row.SessionID))
	status := statusText(*row)
	if row.RecordedStatus != "" {
		status += " (recorded " + row.RecordedStatus + ": the result was a tool error)"
	}
	if row.Preview {
		status += ", preview"
	}
	fields.row("Status", status)
	fields.row("Started", stamp(row.StartedAt)+", took "+millis(row.DurationMS, row.Status))
	if row.Error != nil {
		fields.row("Error", errorText(row.Error))
	}
	if row.ToolError != nil {
		fields.row("Tool error", errorText(row.ToolError))
	}
	if err := fields.flush(false, ""); err != nil {
		return err
	}
	if len(row.Calls) == 0 {
		_, err := fmt.Fprintln(w, "\nNo calls.")
		return err
	}
	return printCalls(w, row.Calls)
}

// placeFields are the lines that say what a call or a task is.
func placeFields(fields *table, row *executionRow) {
	what := fmt.Sprintf("%s (version %d)", row.Action.Name, row.Action.Version)
	if row.Action.Native {
		what = row.Action.Name + " (native tool)"
	}
	beneath := "Request"
	if row.Role == store.RoleTask {
		fields.row("Task", what)
		beneath = "Started by"
	} else {
		fields.row("Call", what)
	}
	if row.Request != nil {
		method := row.Request.Method
		if row.Request.Tool != "" {
			method += " " + row.Request.Tool
		}
		fields.row(beneath, fmt.Sprintf("%s, execution %s (server %s, version %d)", method, row.Request.ID, row.Server, row.ServerVersion))
	}
	if row.CalledBy != nil {
		fields.row("Called by", fmt.Sprintf("%s, execution %s", row.CalledBy.Name, row.CalledBy.ID))
	}
}

// printCalls prints the call tree, then each failed call's error: an
// error in a cell would widen its column for every row.
func printCalls(w interface{ Write([]byte) (int, error) }, calls []*callNode) error {
	if _, err := fmt.Fprintln(w, "\nCalls:"); err != nil {
		return err
	}
	tree := newTable(w, "CALL", "STATUS", "DURATION", "EXECUTION")
	var failed []*callNode
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
			tree.row(strings.Repeat("  ", depth)+n.Name, status, millis(n.DurationMS, n.Status), n.ID)
			if n.Error != nil {
				failed = append(failed, n)
			}
			walk(n.Calls, depth+1)
		}
	}
	walk(calls, 0)
	if err := tree.flush(false, ""); err != nil {
		return err
	}
	if len(failed) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nErrors:"); err != nil {
		return err
	}
	for _, n := range failed {
		if _, err := fmt.Fprintf(w, "  %s %s: %s\n", n.Name, n.ID, errorText(n.Error)); err != nil {
			return err
		}
	}
	return nil
}
