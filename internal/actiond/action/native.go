package action

import "github.com/incusspawn/isx/internal/actiond/policy"

// Native tools: the platform's own, named by reference without a registry
// action. graphql and cel may be listed by any action; the others only by an
// MCP server (ACT-018, ACT-019).
const (
	NativeGraphQL    = "graphql"
	NativeCEL        = "cel"
	NativeProgram    = "program"
	NativeInvoke     = "invoke"
	NativeGetTask    = "get_task"
	NativeCancelTask = "cancel_task"
)

type native struct {
	mcpOnly bool
	kind    policy.ToolKind
}

var natives = map[string]native{
	NativeGraphQL:    {kind: policy.KindNativeGraphQL},
	NativeCEL:        {kind: policy.KindNativeCEL},
	NativeProgram:    {mcpOnly: true, kind: policy.KindNativeProgram},
	NativeInvoke:     {mcpOnly: true, kind: policy.KindNativeInvoke},
	NativeGetTask:    {mcpOnly: true, kind: policy.KindNativeGetTask},
	NativeCancelTask: {mcpOnly: true, kind: policy.KindNativeCancelTask},
}

// IsNative reports whether name is a native tool's.
func IsNative(name string) bool {
	_, ok := natives[name]
	return ok
}

// MCPOnly reports whether only an MCP server may list the native tool.
func MCPOnly(name string) bool { return natives[name].mcpOnly }
