package policy_test

import (
	"encoding/json"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/policy"
)

func TestAllowsOnly_ACT303_ACT309(t *testing.T) {
	cases := []struct {
		name           string
		policies       []policy.Policy
		readOnly       bool
		nonDestructive bool
	}{
		{"ACT-303/304 SELECT only", []policy.Policy{allow([]string{"SELECT"}, "financial.*")}, true, true},
		{"several SELECT-only ALLOWs", []policy.Policy{allow([]string{"SELECT"}, "financial.*"), allow([]string{"SELECT"}, "actions.*")}, true, true},
		{"DENY of anything does not matter", []policy.Policy{allow([]string{"SELECT"}, "*"), deny([]string{"*"}, "auth.*")}, true, true},
		{"ACT-305 INVOKE is a write", []policy.Policy{allow([]string{"SELECT", "INVOKE"}, "*")}, false, false},
		{"ACT-306 RESPOND is a write", []policy.Policy{allow([]string{"SELECT", "RESPOND"}, "*")}, false, false},
		{"ACT-307 * is a write", []policy.Policy{allow([]string{"*"}, "financial.*")}, false, false},
		{"ACT-308 actions:* is a write", []policy.Policy{allow([]string{"actions:*"}, "*")}, false, false},
		{"a wildcard that only matches SELECT still counts", []policy.Policy{allow([]string{"SEL?CT"}, "*")}, false, false},
		{"lower-case select is not SELECT", []policy.Policy{allow([]string{"select"}, "*")}, false, false},
		{"ACT-309/313 INSERT", []policy.Policy{allow([]string{"SELECT", "INSERT"}, "*")}, false, true},
		{"ACT-314 UPDATE", []policy.Policy{allow([]string{"UPDATE"}, "*")}, false, false},
		{"one wide ALLOW among narrow ones", []policy.Policy{allow([]string{"SELECT"}, "*"), allow([]string{"DELETE"}, "auth.*")}, false, false},
		{"no policies at all", nil, false, false},
		{"only DENY", []policy.Policy{deny([]string{"INSERT"}, "*")}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := policy.ReadOnly(c.policies); got != c.readOnly {
				t.Fatalf("ReadOnly = %v, want %v", got, c.readOnly)
			}
			if got := policy.NonDestructive(c.policies); got != c.nonDestructive {
				t.Fatalf("NonDestructive = %v, want %v", got, c.nonDestructive)
			}
		})
	}
}

// ACT-303, ACT-304, ACT-305, ACT-306, ACT-307, ACT-308, ACT-309, ACT-310, ACT-311, ACT-312, ACT-313, ACT-314, ACT-315, ACT-316, ACT-317, ACT-318, ACT-319, ACT-321: annotations derive from policies and the
// tool's kind.
func TestAnnotate(t *testing.T) {
	selectOnly := []policy.Policy{allow([]string{"SELECT"}, "*")}
	selectInsert := []policy.Policy{allow([]string{"SELECT", "INSERT"}, "*")}
	everything := []policy.Policy{allow([]string{"*"}, "*")}
	update := []policy.Policy{allow([]string{"UPDATE"}, "*")}
	cases := []struct {
		name      string
		server    []policy.Policy
		tool      []policy.Policy
		kind      policy.ToolKind
		openWorld bool
		want      string
	}{
		{"ACT-303 server SELECT-only, tool ALLOW *", selectOnly, everything, policy.KindTool, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"ACT-304 server ALLOW *, tool SELECT-only", everything, selectOnly, policy.KindTool, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"ACT-309 both write", everything, everything, policy.KindTool, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-310 callable agent uses the agent's policies", everything, selectOnly, policy.KindAgent, true,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":true}`},
		{"ACT-311 native cel is always read-only", everything, nil, policy.KindNativeCEL, true,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"action of kind cel is read-only", everything, everything, policy.KindCELAction, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"ACT-312 graphql read-only from a SELECT-only server", selectOnly, everything, policy.KindNativeGraphQL, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"ACT-312 graphql ignores tool policies", everything, selectOnly, policy.KindNativeGraphQL, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-312 graphql on an INSERT server", selectInsert, nil, policy.KindNativeGraphQL, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-313 tool SELECT and INSERT", everything, selectInsert, policy.KindTool, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-313 server SELECT and INSERT", selectInsert, update, policy.KindTool, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-314 UPDATE omits destructiveHint", update, update, policy.KindTool, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-315 a model is open world", everything, everything, policy.KindModel, false,
			`{"idempotentHint":false,"openWorldHint":true,"readOnlyHint":false}`},
		{"ACT-316/317 a tool reaching a model is open world", everything, selectOnly, policy.KindTool, true,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":true}`},
		{"ACT-318 program is open world when the server lists an open-world tool", selectOnly, nil, policy.KindNativeProgram, true,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":true,"readOnlyHint":true}`},
		{"ACT-319 program otherwise closed", everything, nil, policy.KindNativeProgram, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-321 program ignores tool policies", everything, selectOnly, policy.KindNativeProgram, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"ACT-321 invoke from the server's policies only", selectOnly, everything, policy.KindNativeInvoke, true,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"ACT-321 invoke on an ALLOW * server", everything, selectOnly, policy.KindNativeInvoke, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
		{"get_task is read-only", everything, nil, policy.KindNativeGetTask, false,
			`{"destructiveHint":false,"idempotentHint":false,"openWorldHint":false,"readOnlyHint":true}`},
		{"cancel_task is never read-only", selectOnly, selectOnly, policy.KindNativeCancelTask, false,
			`{"idempotentHint":false,"openWorldHint":false,"readOnlyHint":false}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := json.Marshal(policy.Annotate(c.server, c.tool, c.kind, c.openWorld))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("annotations %s\nwant        %s", got, c.want)
			}
		})
	}
}
