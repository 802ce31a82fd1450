package policy

import "github.com/modelcontextprotocol/go-sdk/mcp"

// AllowsOnly reports whether every ALLOW policy names only the given
// operations, literally: any other operation, and every wildcard (`*`,
// `actions:*`, `SEL?CT`), counts as another operation. DENY policies do not
// widen or narrow the answer.
//
// A set with no ALLOW policy at all answers false. Such a layer denies
// everything when checked, so it writes nothing either; but a caller may
// leave an empty layer out of Check (no restriction), and an annotation must
// never claim read-only for a tool that could then write. False only costs a
// host's confirmation prompt.
func AllowsOnly(policies []Policy, operations ...string) bool {
	sawAllow := false
	for _, p := range policies {
		if p.Effect != Allow {
			continue
		}
		sawAllow = true
		for _, action := range p.Actions {
			if !isOneOf(action, operations) {
				return false
			}
		}
	}
	return sawAllow
}

func isOneOf(action string, operations []string) bool {
	for _, operation := range operations {
		if action == operation {
			return true
		}
	}
	return false
}

// ReadOnly: every ALLOW policy names only SELECT (ACT-303..309).
func ReadOnly(policies []Policy) bool { return AllowsOnly(policies, Select) }

// NonDestructive: every ALLOW policy names only SELECT and INSERT (ACT-313).
func NonDestructive(policies []Policy) bool { return AllowsOnly(policies, Select, Insert) }

// ToolKind says which annotation rule a listed tool follows.
type ToolKind int

const (
	// KindTool is an action of kind tool or graphql, annotated from the
	// server's or its own policies.
	KindTool ToolKind = iota
	// KindCELAction is an action of kind cel. It evaluates one pure
	// expression, reaching neither the ledger nor the outside, so it is
	// read-only and closed world like the native cel tool.
	KindCELAction
	// KindAgent is a callable agent: its policies are the tool's (ACT-310).
	KindAgent
	// KindModel is a model: always open world (ACT-315).
	KindModel
	// KindNativeCEL is the native cel tool: always read-only (ACT-311).
	KindNativeCEL
	// KindNativeGraphQL, KindNativeProgram and KindNativeInvoke have only the
	// server's policies (ACT-312, ACT-321).
	KindNativeGraphQL
	KindNativeProgram
	KindNativeInvoke
	// KindNativeGetTask is read-only.
	KindNativeGetTask
	// KindNativeCancelTask is never read-only: a running agent's writes roll
	// back.
	KindNativeCancelTask
)

// Annotate derives a listed tool's annotations (seed "Annotations"):
//
//   - readOnlyHint: the server's policies, or the tool's own, allow only
//     SELECT. cel and get_task are always read-only, cancel_task never;
//     graphql, program and invoke use the server's policies alone.
//   - destructiveHint: false when the same policies allow only SELECT and
//     INSERT, otherwise omitted (nil).
//   - openWorldHint: always present. True for a model; for a tool, callable
//     agent or program it is openWorld, which the caller computes from the
//     versions its references resolve to (for program: whether the server
//     lists an open-world tool); false for every other native tool.
//
// tool is the tool's own policies, for a callable agent the agent's; it is
// ignored for native tools.
func Annotate(server, tool []Policy, kind ToolKind, openWorld bool) mcp.ToolAnnotations {
	var readOnly, nonDestructive bool
	switch kind {
	case KindNativeCEL, KindCELAction, KindNativeGetTask:
		readOnly, nonDestructive = true, true
	case KindNativeCancelTask:
		readOnly, nonDestructive = false, false
	case KindNativeGraphQL, KindNativeProgram, KindNativeInvoke:
		readOnly, nonDestructive = ReadOnly(server), NonDestructive(server)
	default:
		readOnly = ReadOnly(server) || ReadOnly(tool)
		nonDestructive = NonDestructive(server) || NonDestructive(tool)
	}
	open := false
	switch kind {
	case KindModel:
		open = true
	case KindTool, KindAgent, KindNativeProgram:
		open = openWorld
	}
	annotations := mcp.ToolAnnotations{ReadOnlyHint: readOnly, OpenWorldHint: &open}
	if nonDestructive {
		notDestructive := false
		annotations.DestructiveHint = &notDestructive
	}
	return annotations
}
