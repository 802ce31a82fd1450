package mcpkit

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The Tasks extension (io.modelcontextprotocol/tasks, revision 2026-07-28):
// a tools/call may answer with a task that the client then polls with
// tasks/get, and can cancel with tasks/cancel. Only a request whose client
// capabilities list the extension may be answered with a task.

// TasksExtension is the extension's identifier, under capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// The extension's methods. There is no tasks/list and no tasks/result: a
// completed task's result comes inlined in tasks/get.
const (
	MethodGetTask    = "tasks/get"
	MethodUpdateTask = "tasks/update"
	MethodCancelTask = "tasks/cancel"
)

// RequiredTasks is the data.requiredCapabilities of a -32021 refusal that
// needs the extension: the capabilities object a client must declare.
func RequiredTasks() map[string]any {
	return map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}
}

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

// NewGetTaskResult is tasks/get's answer for a task.
func NewGetTaskResult(t Task) *GetTaskResult {
	return &GetTaskResult{ResultType: ResultComplete, Task: t}
}

// TimeString is a task's time as the wire carries it: RFC 3339 in UTC, to
// the millisecond.
func TimeString(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// AddTaskClient lets a go-sdk client send the extension's methods, with
// mcp.CallCustomMethod: the SDK implements no Tasks extension of its own.
// The client's requests declare the extension only when its options'
// capabilities do (ClientCapabilities.AddExtension(TasksExtension, ...)).
func AddTaskClient(c *mcp.Client) error {
	if err := mcp.AddSendingCustomMethod[*TaskParams, *GetTaskResult](c, MethodGetTask); err != nil {
		return err
	}
	if err := mcp.AddSendingCustomMethod[*UpdateTaskParams, *AckResult](c, MethodUpdateTask); err != nil {
		return err
	}
	return mcp.AddSendingCustomMethod[*TaskParams, *AckResult](c, MethodCancelTask)
}

// ReadCreateTaskResult reads a tools/call result that may be a task: the
// go-sdk client decodes every tools/call result as a CallToolResult, which
// has no place for the task's fields, so a caller that wants them reads the
// raw result. ok is false when the result is not a task.
func ReadCreateTaskResult(raw json.RawMessage) (result *CreateTaskResult, ok bool, err error) {
	var probe struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, false, err
	}
	if probe.ResultType != ResultTask {
		return nil, false, nil
	}
	result = &CreateTaskResult{}
	if err := json.Unmarshal(raw, result); err != nil {
		return nil, false, err
	}
	return result, true, nil
}

// TaskHeaders wraps a client's HTTP transport so that each tasks/* request
// carries Mcp-Name: <taskId>, as the extension asks of Streamable HTTP: the
// go-sdk client sets Mcp-Name only for the methods it knows.
func TaskHeaders(next http.RoundTripper) http.RoundTripper {
	return taskHeaders{next: next}
}

type taskHeaders struct{ next http.RoundTripper }

func (t taskHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Header.Get("Mcp-Method") {
	case MethodGetTask, MethodUpdateTask, MethodCancelTask:
	default:
		return t.next.RoundTrip(r)
	}
	if r.GetBody == nil || r.Header.Get("Mcp-Name") != "" {
		return t.next.RoundTrip(r)
	}
	body, err := r.GetBody()
	if err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	var request struct {
		Params struct {
			TaskID string `json:"taskId"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &request) == nil && request.Params.TaskID != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Mcp-Name", request.Params.TaskID)
		r.Body = io.NopCloser(bytes.NewReader(raw))
	}
	return t.next.RoundTrip(r)
}
