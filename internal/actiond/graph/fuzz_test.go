package graph_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
	"github.com/incusspawn/isx/internal/clock"
)

// fuzzDocuments take every kind of variable the schema has: IDs, strings,
// integers, enums, JSON, timestamps and nested input objects, in mutations
// marked @dryRun so that nothing stays.
var fuzzDocuments = []string{
	`mutation($id: ID, $input: ActionInput!) @dryRun { actions { createAction(id: $id, input: $input) { id version definition } } }`,
	`mutation($id: ID!, $input: ActionUpdateInput!) @dryRun { actions { updateAction(id: $id, input: $input) { id version } } }`,
	`mutation($input: PrincipalInput!) @dryRun { auth { putPrincipal(input: $input) { name version } } }`,
	`mutation($ns: String!, $key: String!, $value: JSON!) @dryRun { kv { put(namespace: $ns, key: $key, value: $value) { key value } } }`,
	`query($where: ExecutionWhere, $first: Int, $after: String, $last: Int, $before: String) { actions { executions(where: $where, first: $first, after: $after, last: $last, before: $before) { edges { cursor } pageInfo { hasNextPage } } } }`,
	`query($first: Int, $after: String) { actions { list(first: $first, after: $after) { edges { node { id } } } } }`,
}

// validCodes are the codes an error of the API carries.
var validCodes = []string{graph.CodeAccessDenied, graph.CodeAlreadyExists, graph.CodeBadRequest, graph.CodeNotFound,
	graph.CodeCELEvaluation, graph.CodeValidationFailed, graph.CodeConflict}

// FuzzVariables: whatever variables a request carries, the API answers
// without failing inside (no INTERNAL error, which a panic becomes); every
// error carries one of the API's codes and a message; data is null exactly
// when there are errors; and a dry run leaves nothing in the unit of work.
func FuzzVariables(f *testing.F) {
	f.Add(uint8(0), []byte(`{"input": {"name": "x", "kind": "cel", "config": {"expression": "1"}, "tool": {"inputSchema": {"type": "object"}}}}`))
	f.Add(uint8(0), []byte(`{"id": "00000000-0000-4000-8000-000000000001", "input": {"name": "s", "description": "d", "kind": "skill", "config": {"instructions": "i", "examples": [{"situation": "a", "resolution": "b", "reason": "c"}]}}}`))
	f.Add(uint8(0), []byte(`{"input": {"name": "m", "kind": "mcp", "config": {}, "mcp": {"name": "m", "mode": "LIVE"}, "policies": [{"effect": "ALLOW", "actions": ["*"], "resources": ["*"]}]}}`))
	f.Add(uint8(1), []byte(`{"id": "nope", "input": {"description": "x"}}`))
	f.Add(uint8(2), []byte(`{"input": {"name": "p", "policies": [{"effect": "DENY", "actions": ["financial:actions:Read"], "resources": ["*"], "condition": "true"}]}}`))
	f.Add(uint8(3), []byte(`{"ns": "n", "key": "k", "value": {"a": [1, 2.5, null, true, "x"]}}`))
	f.Add(uint8(4), []byte(`{"where": {"status": "RUNNING", "startedAfter": "2026-01-01T00:00:00Z", "role": "request"}, "first": -1}`))
	f.Add(uint8(4), []byte(`{"where": {"startedBefore": "yesterday"}, "last": 2147483648, "before": "!!"}`))
	f.Add(uint8(5), []byte(`{"first": 1e400, "after": {"x": 1}}`))
	f.Add(uint8(5), []byte(`{"first": "1", "unknown": 1}`))
	s := storetest.Open(f, store.SQLite, clock.NewFake(start))
	f.Fuzz(func(t *testing.T, which uint8, variables []byte) {
		// As the handler reads them: numbers kept as written.
		var vars map[string]any
		decoder := json.NewDecoder(bytes.NewReader(variables))
		decoder.UseNumber()
		if decoder.Decode(&vars) != nil {
			return // the handler refuses a body that is not JSON before GraphQL
		}
		work := s.NewWork(graph.DefaultAccount)
		env := graph.Env{Store: s, Work: work, Access: graph.RootAccess(), Clock: clock.NewFake(start), IDs: fuzzIDs{}, Natives: natives}
		resp := graph.Execute(context.Background(), env, graph.Request{Query: fuzzDocuments[int(which)%len(fuzzDocuments)], Variables: vars})
		for _, e := range resp.Errors {
			code, _ := e.Extensions["code"].(string)
			if !slices.Contains(validCodes, code) || e.Message == "" {
				t.Fatalf("error %q with code %q for variables %s", e.Message, code, variables)
			}
		}
		if (len(resp.Errors) > 0) == (len(resp.Data) > 0 && string(resp.Data) != "null") {
			t.Fatalf("data %s with %d errors", resp.Data, len(resp.Errors))
		}
		if len(resp.Data) > 0 && !json.Valid(resp.Data) {
			t.Fatalf("data is not JSON: %s", resp.Data)
		}
		if len(work.Writes()) > 0 {
			t.Fatalf("a dry run or a query left %d writes", len(work.Writes()))
		}
	})
}

type fuzzIDs struct{}

func (fuzzIDs) New() string { return "00000000-0000-4000-8000-00000000f022" }

// A Timestamp variable that is not RFC 3339 is the caller's mistake, coded
// BAD_REQUEST over HTTP, not an INTERNAL failure of the server (found by
// FuzzVariables).
func TestBadTimestampVariableIsBadRequest(t *testing.T) {
	a := newAPI(t, store.SQLite)
	e := a.root(`query($where: ExecutionWhere) { actions { executions(where: $where) { edges { cursor } } } }`,
		map[string]any{"where": map[string]any{"startedBefore": "yesterday"}}).fails(graph.CodeBadRequest)
	if !strings.Contains(e.Message, "RFC 3339") {
		t.Fatalf("message %q does not say what a Timestamp is", e.Message)
	}
}
