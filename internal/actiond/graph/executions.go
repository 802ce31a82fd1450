package graph

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/incusspawn/isx/internal/actiond/graph/model"
	"github.com/incusspawn/isx/internal/actiond/policy"
	"github.com/incusspawn/isx/internal/actiond/registry"
	"github.com/incusspawn/isx/internal/actiond/store"
)

// page is a connection's paging arguments: first after a cursor, or last
// before one.
type page struct {
	first, last   *int
	after, before *string
}

func (p page) backward() bool { return p.last != nil || p.before != nil }

// executionQuery is what a list of executions selects: the columns the
// store filters by, and what only a record's JSON says (method, tool).
type executionQuery struct {
	filter store.ExecutionFilter
	method string
	tool   string
}

// executionQueryOf reads an ExecutionWhere, refusing values no execution
// could match so that a typo does not read as an empty history.
func executionQueryOf(where *model.ExecutionWhere) (executionQuery, error) {
	var q executionQuery
	if where == nil {
		return q, nil
	}
	f := &q.filter
	f.Preview = where.Preview
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&f.ActionID, where.ActionID)
	set(&f.SessionID, where.SessionID)
	set(&f.ParentID, where.ParentID)
	set(&f.StartedBy, where.StartedBy)
	set(&f.Caller, where.Caller)
	set(&q.method, where.Method)
	set(&q.tool, where.Tool)
	if where.Role != nil {
		roles := []string{store.RoleRequest, store.RoleRefusal, store.RoleCall, store.RoleTask, store.RoleReplay}
		if !slices.Contains(roles, *where.Role) {
			return q, badRequest("where.role", "%q is not a role: use request, refusal, call, task or replay", *where.Role)
		}
		f.Role = *where.Role
	}
	if where.Status != nil {
		if !where.Status.IsValid() {
			return q, badRequest("where.status", "%q is not an execution status", string(*where.Status))
		}
		f.Status = string(*where.Status)
	}
	if where.StartedAfter != nil {
		f.StartedFrom = *where.StartedAfter
	}
	if where.StartedBefore != nil {
		f.StartedBefore = *where.StartedBefore
	}
	if !f.StartedFrom.IsZero() && !f.StartedBefore.IsZero() && !f.StartedFrom.Before(f.StartedBefore) {
		return q, badRequest("where.startedAfter", "startedAfter must be earlier than startedBefore")
	}
	return q, nil
}

// matches applies what the store cannot filter by: a request's method and
// the tool its tools/call named, or a call's tool.
func (q executionQuery) matches(e *store.Execution) bool {
	if q.method == "" && q.tool == "" {
		return true
	}
	var input struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	isRequest := e.EventType == "mcp.request"
	if isRequest {
		// A record that does not decode has no method or tool to match.
		_ = json.Unmarshal(e.Input, &input)
	}
	if q.method != "" && (!isRequest || input.Method != q.method) {
		return false
	}
	if q.tool == "" {
		return true
	}
	if isRequest {
		return input.Method == "tools/call" && input.Params.Name == q.tool
	}
	return e.ActionName == q.tool
}

func cursorOf(name string, value *string) (int64, error) {
	if value == nil || *value == "" {
		return 0, nil
	}
	seq, err := strconv.ParseInt(*value, 10, 64)
	if err != nil || seq < 0 {
		return 0, badRequest(name, "%q is not a cursor of this list: pass an edge's cursor", *value)
	}
	return seq, nil
}

// executions lists the executions q selects that the reader may read, a page
// at a time; an execution's cursor is its position in the record. A page
// read with last is the newest executions before the cursor, oldest first
// like every page.
func executions(ctx context.Context, q executionQuery, p page) (*model.ExecutionConnection, error) {
	st := current(ctx)
	if p.backward() && (p.first != nil || p.after != nil) {
		return nil, badRequest("last", "page forward with first and after, or backward with last and before, not both")
	}
	size, cursorName := p.first, "after"
	cursorValue := p.after
	if p.backward() {
		size, cursorName, cursorValue = p.last, "before", p.before
	}
	limit, err := pageSize(size)
	if err != nil {
		return nil, err
	}
	cursor, err := cursorOf(cursorName, cursorValue)
	if err != nil {
		return nil, err
	}
	f := q.filter
	f.Account = st.env.Account
	f.Newest = p.backward()
	found, more, err := readablePage(limit, cursor,
		func(from int64, n int) ([]*store.Execution, error) {
			if f.Newest {
				f.BeforeSeq = from
			} else {
				f.AfterSeq = from
			}
			f.Limit = n
			var rows []*store.Execution
			err := st.env.Store.Read(ctx, func(tx *store.Tx) error {
				var err error
				rows, err = tx.Executions(ctx, f)
				return err
			})
			return rows, err
		},
		func(row *store.Execution) int64 { return row.Seq },
		func(row *store.Execution) bool {
			return q.matches(row) && st.env.Access.Allowed(ctx, policy.Select, registry.ResourceExecution, row)
		})
	if err != nil {
		return nil, err
	}
	info := &model.PageInfo{}
	if f.Newest {
		slices.Reverse(found)
		// What follows the before cursor is at least the row it names.
		info.HasPreviousPage, info.HasNextPage = more, cursor > 0
	} else {
		info.HasNextPage, info.HasPreviousPage = more, cursor > 0
	}
	conn := &model.ExecutionConnection{Edges: []*model.ExecutionEdge{}, PageInfo: info}
	for i, row := range found {
		cursor := strconv.FormatInt(row.Seq, 10)
		conn.Edges = append(conn.Edges, &model.ExecutionEdge{Cursor: cursor, Node: &executionRecord{rec: row}})
		if i == 0 {
			info.StartCursor = &cursor
		}
		info.EndCursor = &cursor
	}
	return conn, nil
}
