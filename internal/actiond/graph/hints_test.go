package graph_test

import (
	"testing"

	"github.com/incusspawn/isx/internal/actiond/store"
)

// Found tried as a new user would: GRAPHQL_VALIDATION_FAILED carried an
// empty hint. Every code's hint is a sentence a person can act on: a
// document that does not parse, one that asks for a field there is not, a
// variable of the wrong type, a refused definition, a missing action.
func TestEveryErrorHasAHint(t *testing.T) {
	a := newAPI(t, store.SQLite)
	for _, c := range []struct {
		query string
		vars  map[string]any
		code  string
	}{
		{`{ actions {`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{`{ nothing }`, nil, "GRAPHQL_VALIDATION_FAILED"},
		{`query($n: Int!) { actions { list(first: $n) { edges { cursor } } } }`, map[string]any{"n": "many"}, "GRAPHQL_VALIDATION_FAILED"},
		{`mutation { actions { createAction(id: "00000000-0000-4000-8000-000000000001", input: {name: "x", kind: "robot"}) { id } } }`, nil, "BAD_REQUEST"},
		{`mutation { actions { deleteAction(id: "00000000-0000-4000-8000-0000000000ff") { id } } }`, nil, "NOT_FOUND"},
	} {
		e := a.root(c.query, c.vars).fails(c.code)
		if hint, _ := e.Extensions["hint"].(string); len(hint) < 20 {
			t.Errorf("%s: hint %q for %s", c.query, hint, c.code)
		}
	}
}
