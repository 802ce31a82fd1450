package model

import (
	"context"
	"time"
)

// The namespaces of queries hold nothing: their fields are resolvers, which
// may run concurrently.
type (
	ActionsQuery struct{}
	KVQuery      struct{}
	AuthQuery    struct{}
)

// The namespaces of mutations are methods without a context, so that gqlgen
// runs their fields one after another in document order, as it runs the
// root mutation's fields: a field with a context would run concurrently
// with its siblings, and a createAction could miss the tool its sibling
// before it creates. graph's implementations carry the operation's context.
type (
	ActionsMutation interface {
		CreateAction(id string, input map[string]any) (Action, error)
		UpdateAction(id string, input map[string]any) (Action, error)
		DeleteAction(id string) (Action, error)
		CloseSession(actionID string, sessionID string) (Session, error)
		ReplayExecution(executionID string, version *int, draft map[string]any, model *ReplayModel) (*ExecutionReplay, error)
		RerunExecution(executionID string) (Execution, error)
	}
	KVMutation interface {
		Put(namespace string, key string, value JSON) (*KVValue, error)
		Delete(namespace string, key string) (*KVValue, error)
	}
	AuthMutation interface {
		PutPrincipal(input map[string]any) (*Principal, error)
		DeletePrincipal(name string) (*Principal, error)
	}
)

// Action is an action version as the API shows it; its executions field is
// a resolver of its own.
type Action interface {
	ID() string
	Version() int
	Name() string
	Kind() string
	Enabled() bool
	Deleted() bool
	Created() time.Time
	Modified() time.Time
	Description() *string
	Config() (JSON, error)
	Tool() (JSON, error)
	Agent() (JSON, error)
	Triggers() ([]JSON, error)
	Policies() ([]*Policy, error)
	Tools() ([]*ToolReference, error)
	Skills() []*SkillReference
	Execution() *ExecutionSettings
	Session() (JSON, error)
	Mcp(ctx context.Context) (*McpBlock, error)
	OfferedTools(ctx context.Context) (*OfferedTools, error)
	Definition() (JSON, error)
	History(ctx context.Context) ([]Action, error)
}

// Execution is an execution record as the API shows it.
type Execution interface {
	ID() string
	ActionID() string
	ActionVersion() int
	ActionName() string
	EventType() string
	Role() string
	Status() ExecutionStatus
	Outcome() string
	Caller() string
	Subject() string
	Client() string
	Input() JSON
	Output() JSON
	Error() JSON
	Invocation() JSON
	McpRequest() *McpRequest
	Preview() bool
	GrantedInPreview() bool
	WriteSet(ctx context.Context) []*WriteSetEntry
	WriteSetUnreadable(ctx context.Context) int
	ParentID() *string
	Calls(ctx context.Context) ([]Execution, error)
	Uses(ctx context.Context) ([]*ExecutionUse, error)
	SessionID() *string
	StartedBy() *StartedBy
	CancelledBy() *CancelledBy
	RolledBackByExecutionID() *string
	Draft() JSON
	StartedAt() time.Time
	EndedAt() *time.Time
}

// Session is a session of an MCP server as the API shows it; its
// executions field is a resolver of its own.
type Session interface {
	ActionID() string
	ID() string
	Input() JSON
	CreatedAt() time.Time
	ClosedAt() *time.Time
	Closed() bool
	RequestCount() int
	Inputs(ctx context.Context) ([]*SessionInput, error)
}
