package store

import (
	"context"
	"encoding/json"
	"fmt"
)

// ToolError is what every view a person reads shows for a request
// answered with a tool result with isError. The record keeps the seed's
// status, SUCCEEDED (Twisp answered with a result), beside it.
const ToolError = "TOOL_ERROR"

// Outcome is how e ended for its client, as every reader view shows it:
// its status, or ToolError for a request (or its replay) whose result was a
// tool error, as the request's invocation.output records.
func Outcome(e *Execution) string {
	if e.Status == Succeeded && RecordedToolError(e) != nil {
		return ToolError
	}
	return e.Status
}

// ToolFailure is the tool error a request answered with, as its
// invocation recorded it.
type ToolFailure struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// RecordedToolError is the tool error a request or a replay answered
// with; nil when its result was no tool error or it is another kind of
// execution.
func RecordedToolError(e *Execution) *ToolFailure {
	if (e.Role != RoleRequest && e.Role != RoleReplay) || len(e.Invocation) == 0 {
		return nil
	}
	var invocation struct {
		Output struct {
			IsError bool        `json:"isError"`
			Error   ToolFailure `json:"error"`
		} `json:"output"`
	}
	if json.Unmarshal(e.Invocation, &invocation) != nil || !invocation.Output.IsError {
		return nil
	}
	return &invocation.Output.Error
}

// ExecutionIDsByPrefix lists up to limit IDs of the account's executions
// that start with prefix, oldest first, for a person who typed the first
// characters of one.
func (tx *Tx) ExecutionIDsByPrefix(ctx context.Context, account, prefix string, limit int) ([]string, error) {
	rows, err := tx.query(ctx, "SELECT id FROM executions WHERE account = ? AND substr(id, 1, ?) = ? ORDER BY seq LIMIT ?", account, len(prefix), prefix, limit)
	if err != nil {
		return nil, fmt.Errorf("store: find executions by prefix %s: %w", prefix, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
