package mcpkit

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks extension (io.modelcontextprotocol/tasks, revision 2026-07-28):
// a tools/call may answer with a task that the client then polls with
// tasks/get, and can cancel with tasks/cancel. Only a request whose client
// capabilities list the extension may be answered with a task.

// TasksExtension is the extension's identifier, under capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskStatus is a task's status word, the same in every result.
type TaskStatus string

const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// TaskStatuses lists every status, for schemas.
var TaskStatuses = []TaskStatus{TaskWorking, TaskInputRequired, TaskCompleted, TaskFailed, TaskCancelled}

// Finished says whether the status is final.
func (s TaskStatus) Finished() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// Task is the extension's task.
type Task struct {
	TaskID        string     `json:"taskId"`
	Status        TaskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are RFC 3339 times.
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long the task is kept after it was created; nil (sent as
	// null) for as long as the server likes.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
}

// Result types: every 2026-07-28 result says which it is.
const (
	ResultComplete = "complete"
	ResultTask     = "task"
)

// CreateTaskResult answers a tools/call with a task: the task's fields,
// flat, and resultType "task".
type CreateTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
}

// NewCreateTaskResult wraps a task.
func NewCreateTaskResult(t Task) *CreateTaskResult {
	return &CreateTaskResult{ResultType: ResultTask, Task: t}
}

// TaskParams are the params of tasks/get and tasks/cancel.
type TaskParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// RequestState is echoed from the last task the client read; the
	// server treats it as untrusted input.
	RequestState string `json:"requestState,omitempty"`
}

// UpdateTaskParams are the params of tasks/update.
type UpdateTaskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	RequestState   string                     `json:"requestState,omitempty"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// GetTaskResult answers tasks/get: the task with, by status, the result of a
// completed one or the JSON-RPC error of a failed one.
type GetTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	Task
	Result json.RawMessage `json:"result,omitempty"`
	Error  *TaskError      `json:"error,omitempty"`
}

// TaskError is the JSON-RPC error a failed task ended with.
type TaskError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// AckResult is the empty, complete result of tasks/update and tasks/cancel.
type AckResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// NewAck is an acknowledgement.
func NewAck() *AckResult { return &AckResult{ResultType: ResultComplete} }
