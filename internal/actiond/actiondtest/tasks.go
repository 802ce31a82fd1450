package actiondtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/incusspawn/isx/internal/actiond/agent"
	"github.com/incusspawn/isx/internal/actiond/modeltest"
	"github.com/incusspawn/isx/internal/mcpkit"
)

// FakeModel starts a model provider speaking the Anthropic Messages API
// (and an OpenAI-compatible chat API) on loopback, answering as script
// says; it stops at the end of the test. Key is the API key it requires.
func FakeModel(t testing.TB, key string, script modeltest.Script) *modeltest.Server {
	t.Helper()
	server, err := modeltest.Start(script, modeltest.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(server.Close)
	return server
}

// Providers configures a fake model as the providers anthropic (its
// Messages API) and openai (its chat API), with key.
func Providers(model *modeltest.Server, key string) []agent.Provider {
	return []agent.Provider{
		{Name: agent.APIAnthropic, API: agent.APIAnthropic, BaseURL: model.URL, APIKey: key},
		{Name: agent.APIOpenAI, API: agent.APIOpenAI, BaseURL: model.URL + "/v1", APIKey: key},
	}
}

// AgentSpec describes a callable agent for createAction.
type AgentSpec struct {
	Name         string
	Instructions string
	// Provider is agent.model.provider (default anthropic); Model the
	// model's name, which a script may read to decide its answers.
	Provider     string
	Model        string
	InputSchema  map[string]any
	OutputSchema map[string]any
	Tools        []map[string]any
	Policies     []map[string]any
	Retries      *int
	Timeout      string
	MaxTurns     int
}

// Input is createAction's input.
func (a AgentSpec) Input() map[string]any {
	input := a.InputSchema
	if input == nil {
		input = Object(map[string]any{})
	}
	model := map[string]any{"name": a.Model}
	if a.Provider != "" {
		model["provider"] = a.Provider
	}
	block := map[string]any{"instructions": a.Instructions, "model": model}
	if a.Instructions == "" {
		block["instructions"] = "You are the test agent " + a.Name + "."
	}
	if a.MaxTurns > 0 {
		block["maxTurns"] = a.MaxTurns
	}
	tool := map[string]any{"inputSchema": input}
	if a.OutputSchema != nil {
		tool["outputSchema"] = a.OutputSchema
	}
	def := map[string]any{"name": a.Name, "description": "Callable agent " + a.Name, "kind": "agent", "config": map[string]any{},
		"agent": block, "tool": tool}
	if a.Tools != nil {
		def["tools"] = a.Tools
	}
	if a.Policies != nil {
		def["policies"] = a.Policies
	}
	execution := map[string]any{}
	if a.Retries != nil {
		execution["retries"] = *a.Retries
	}
	if a.Timeout != "" {
		execution["responseTimeout"] = a.Timeout
	}
	if len(execution) > 0 {
		def["execution"] = execution
	}
	return def
}

// TaskSession is a go-sdk client session that can send the Tasks
// extension's methods, and declares the extension in every request when it
// was connected with it. The go-sdk client decodes every tools/call answer
// as a CallToolResult, which has no place for a task: the session's HTTP
// client keeps the last tools/call answer as it arrived, so that a test
// reads the task the real client received.
type TaskSession struct {
	*mcp.ClientSession
	tap *tap
}

// ConnectTasks connects like Connect; with extension, the client declares
// io.modelcontextprotocol/tasks.
func (e *Env) ConnectTasks(name, token, revision string, extension bool) *TaskSession {
	e.T.Helper()
	caps := &mcp.ClientCapabilities{}
	if extension {
		caps.AddExtension(mcpkit.TasksExtension, map[string]any{})
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "actiondtest", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	if err := mcpkit.AddTaskClient(client); err != nil {
		e.T.Fatal(err)
	}
	t := &tap{next: mcpkit.TaskHeaders(bearer{token: token, next: http.DefaultTransport})}
	transport := &mcp.StreamableClientTransport{Endpoint: e.Endpoint(name), HTTPClient: &http.Client{Transport: t, Timeout: 2 * time.Minute}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		e.T.Fatalf("connect to %s at %s: %v", name, revision, err)
	}
	e.T.Cleanup(func() { session.Close() })
	return &TaskSession{ClientSession: session, tap: t}
}

// CallForTask calls a tool and returns the task it answered with, or nil
// and the tool result when the answer was not a task.
func (s *TaskSession) CallForTask(t testing.TB, name string, args map[string]any) (*mcpkit.CreateTaskResult, *mcp.CallToolResult) {
	t.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	raw := s.tap.lastResult()
	task, ok, err := mcpkit.ReadCreateTaskResult(raw)
	if err != nil {
		t.Fatalf("tools/call %s answered %s: %v", name, raw, err)
	}
	if !ok {
		return nil, res
	}
	return task, res
}

// LastRaw is the last tools/call answer's result as it arrived.
func (s *TaskSession) LastRaw() json.RawMessage { return s.tap.lastResult() }

// GetTask sends tasks/get.
func (s *TaskSession) GetTask(id string) (*mcpkit.GetTaskResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	return mcp.CallCustomMethod[*mcpkit.TaskParams, *mcpkit.GetTaskResult](ctx, s.ClientSession, mcpkit.MethodGetTask, &mcpkit.TaskParams{TaskID: id})
}

// CancelTask sends tasks/cancel.
func (s *TaskSession) CancelTask(id string) (*mcpkit.AckResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	return mcp.CallCustomMethod[*mcpkit.TaskParams, *mcpkit.AckResult](ctx, s.ClientSession, mcpkit.MethodCancelTask, &mcpkit.TaskParams{TaskID: id})
}

// UpdateTask sends tasks/update.
func (s *TaskSession) UpdateTask(id string) (*mcpkit.AckResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callLimit)
	defer cancel()
	return mcp.CallCustomMethod[*mcpkit.UpdateTaskParams, *mcpkit.AckResult](ctx, s.ClientSession, mcpkit.MethodUpdateTask, &mcpkit.UpdateTaskParams{TaskID: id})
}

// WaitTask polls tasks/get until the task's status is one of want, and
// returns that answer; a read that fails, or limit passing, fails the test.
func (s *TaskSession) WaitTask(t testing.TB, id string, limit time.Duration, want ...mcpkit.TaskStatus) *mcpkit.GetTaskResult {
	t.Helper()
	var last *mcpkit.GetTaskResult
	var lastErr error
	WaitFor(t, "task "+id+" to be "+statuses(want), limit, func() bool {
		last, lastErr = s.GetTask(id)
		if lastErr != nil {
			return true
		}
		for _, w := range want {
			if last.Status == w {
				return true
			}
		}
		return false
	})
	if lastErr != nil {
		t.Fatalf("tasks/get %s: %v", id, lastErr)
	}
	return last
}

func statuses(list []mcpkit.TaskStatus) string {
	out := ""
	for i, s := range list {
		if i > 0 {
			out += " or "
		}
		out += string(s)
	}
	return out
}

// tap keeps the last tools/call answer its client received.
type tap struct {
	next http.RoundTripper
	mu   sync.Mutex
	last json.RawMessage
}

func (t *tap) RoundTrip(r *http.Request) (*http.Response, error) {
	var method struct {
		Method string `json:"method"`
	}
	if r.Body != nil && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			raw, _ := io.ReadAll(body)
			json.Unmarshal(raw, &method)
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil || method.Method != "tools/call" {
		return resp, err
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	var answer struct {
		Result json.RawMessage `json:"result"`
	}
	json.Unmarshal(raw, &answer)
	t.mu.Lock()
	t.last = answer.Result
	t.mu.Unlock()
	return resp, nil
}

func (t *tap) lastResult() json.RawMessage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}
