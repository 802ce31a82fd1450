// Package registry keeps the actions, principals and KV values of an account
// as rows written through a unit of work (store.Work). The same functions
// serve a GraphQL request, whose work is applied at its end, and a tool's
// graphql() call inside an MCP request, whose work the endpoint previews or
// applies: nothing here commits on its own.
//
// Row layout:
//
//	Action      <id>                       the latest version (head)
//	Action      <id>@<version, 10 digits>  every version, append-only
//	ActionName  <name>                     {"id"} of the non-deleted action so named
//	Principal   <name>                     {name, policies, version}
//	KVValue     <namespace>/<key>          {namespace, key, value}
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/coded"
)

// Tables of the registry's rows.
const (
	TableAction     = "Action"
	TableActionName = "ActionName"
	TablePrincipal  = "Principal"
	TableKV         = "KVValue"
)

// Policy resources: <namespace>.<resource>.
const (
	ResourceAction     = "actions.Action"
	ResourceActionName = "actions.ActionName"
	ResourceExecution  = "actions.Execution"
	ResourceSession    = "actions.Session"
	ResourcePrincipal  = "auth.Principal"
	ResourceKV         = "financial.KVValue"
)

var tableNamespaces = map[string]string{
	TableAction:     "actions",
	TableActionName: "actions",
	TablePrincipal:  "auth",
	TableKV:         "financial",
}

// Resource is the policy resource of a row of table: <namespace>.<table>.
// Tables this package does not know are business data, in financial.
func Resource(table string) string {
	namespace, ok := tableNamespaces[table]
	if !ok {
		namespace = "financial"
	}
	return namespace + "." + table
}

// Error codes, for GraphQL's extensions.code.
const (
	CodeAlreadyExists = "ALREADY_EXISTS"
	CodeNotFound      = "NOT_FOUND"
	CodeBadRequest    = "BAD_REQUEST"
)

// Sentinels an *Error wraps, for errors.Is.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	ErrInvalid       = errors.New("invalid")
)

// Error is a refused registry operation. Field names the argument or input
// field at fault, when there is one; the cause is one of the sentinels above.
type Error struct {
	coded.Base
	Field string
}

func newError(code, field string, cause error, format string, args ...any) *Error {
	return &Error{Base: coded.Base{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}, Field: field}
}

// Error is the field, then the message; the sentinel it wraps adds nothing
// a person needs.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func notFound(field, format string, args ...any) *Error {
	return newError(CodeNotFound, field, ErrNotFound, format, args...)
}

func alreadyExists(field, format string, args ...any) *Error {
	return newError(CodeAlreadyExists, field, ErrAlreadyExists, format, args...)
}

func invalid(field, format string, args ...any) *Error {
	return newError(CodeBadRequest, field, ErrInvalid, format, args...)
}

// get reads a row through the work and decodes it into v; ok is false when
// the row does not exist.
func get(ctx context.Context, w *store.Work, table, key string, v any) (bool, error) {
	raw, ok, err := w.Get(ctx, table, key)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("registry: the stored %s row %q does not decode: %w", table, key, err)
	}
	return true, nil
}

func put(ctx context.Context, w *store.Work, table, key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("registry: encode %s row %q: %w", table, key, err)
	}
	return w.Put(ctx, table, key, raw)
}
