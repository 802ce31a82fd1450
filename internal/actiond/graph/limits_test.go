package graph_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/incusspawn/isx/internal/actiond/graph"
	"github.com/incusspawn/isx/internal/actiond/store"
	"github.com/incusspawn/isx/internal/actiond/store/storetest"
)

// attack is the document of the issue: n aliased lists of 500 actions,
// each with its history.
func attack(n int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		fmt.Fprintf(&b, " a%d: actions { list(first: 500) { edges { node { id name version history { id version name } } } } }", i)
	}
	b.WriteString(" }")
	return b.String()
}

// refused checks a refusal of the query limits: code, the limit named,
// a hint, no data.
func refused(t *testing.T, r interface {
	fails(string) gqlError
}, names string) {
	t.Helper()
	e := r.fails(graph.CodeQueryLimit)
	hint, _ := e.Extensions["hint"].(string)
	if !strings.Contains(e.Message, names) || hint == "" || strings.HasPrefix(hint, "Read the message") {
		t.Errorf("refusal %q, hint %q: want it to name %q and say what to do", e.Message, hint, names)
	}
}

// An operation past the depth, alias or complexity limit is refused before
// anything runs, with QUERY_LIMIT_EXCEEDED naming the limit and a hint:
// 2,000 aliased lists of 500 actions with their histories; 100 of them
// (under the alias limit, past the complexity); a page of 500 given in a
// variable; 300 aliased putPrincipal mutations, none of which writes; 25
// levels of calls. What the estimate cannot see, a list without pages as
// long as the data (history within history), is refused once it has
// resolved MaxFields fields. The explorer's kind of query and the standard
// introspection query pass.
func TestQueryLimits(t *testing.T) {
	a := newAPI(t, store.SQLite)
	a.create(id(700), starlarkInput("versions")).ok()
	for v := range 249 {
		a.update(id(700), map[string]any{"description": fmt.Sprint("version ", v+2)}).ok()
	}

	refused(t, a.root(attack(2000)), "2000 aliased fields")
	refused(t, a.root(attack(100)), "about")
	refused(t, a.root(`query($n: Int) { actions { list(first: $n) { edges { node { executions(first: $n) { edges { node { id } } } } } } } }`,
		map[string]any{"n": 500}), "at most 100000")

	var writes strings.Builder
	writes.WriteString("mutation {")
	for i := range 300 {
		fmt.Fprintf(&writes, ` p%d: auth { putPrincipal(input: {name: "flood-%d", policies: []}) { name } }`, i, i)
	}
	writes.WriteString(" }")
	refused(t, a.root(writes.String()), "300 aliased fields")
	if s := jsonOf(t, a.root(`{ auth { principal(name: "flood-1") { name } } }`).ok()); strings.Contains(s, "flood-1") {
		t.Errorf("a refused mutation wrote: %s", s)
	}

	deep := "id"
	for range 25 {
		deep = "calls { " + deep + " }"
	}
	refused(t, a.root(`{ execution(id: "x") { `+deep+` } }`), "27 deep")

	// A fragment spread many times counts at every spread: 500 actions,
	// each with 4 × 4 spreads of 8 fields.
	refused(t, a.root(`{ actions { list(first: 500) { edges { node { ...four } } } } }
fragment four on Action { h1: history { ...row } h2: history { ...row } h3: history { ...row } h4: history { ...row } }
fragment row on Action { ...fields h1: history { ...fields } h2: history { ...fields } h3: history { ...fields } }
fragment fields on Action { id name version description kind enabled created modified }`), "about")

	// History within history: 50³ by the estimate.
	refused(t, a.root(`{ actions { list { edges { node { history { history { history { id version } } } } } } } }`), "about")
	// History within history of one action: some 15,000 fields by the
	// estimate (a history of 50), 250 × 250 × 6 as the data goes.
	refused(t, a.root(`{ actions { list(first: 1) { edges { node { history { history { id version name kind enabled deleted } } } } } } }`), "resolved more than")

	// Within the limits.
	a.root(`{ actions { list(first: 500) { edges { node { id name history { version } } } } } }`).ok()
	a.root(`query($id: ID!) { execution(id: $id) { id calls { id calls { id calls { id calls { id calls { id writeSet { table key } } } } } } } }`,
		map[string]any{"id": id(1)}).ok()
	a.root(introspection).ok()
}

// introspection is the query GraphQL tools send to read a schema.
const introspection = `query IntrospectionQuery {
  __schema {
    queryType { name } mutationType { name } subscriptionType { name }
    types { ...FullType }
    directives { name description locations args { ...InputValue } }
  }
}
fragment FullType on __Type {
  kind name description
  fields(includeDeprecated: true) { name description args { ...InputValue } type { ...TypeRef } isDeprecated deprecationReason }
  inputFields { ...InputValue }
  interfaces { ...TypeRef }
  enumValues(includeDeprecated: true) { name description isDeprecated deprecationReason }
  possibleTypes { ...TypeRef }
}
fragment InputValue on __InputValue { name description type { ...TypeRef } defaultValue }
fragment TypeRef on __Type {
  kind name
  ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name ofType { kind name } } } } } } }
}`

// BenchmarkRefusedAttack is what the refusal of the document
// costs (2,000 aliased lists of 500 with their histories), beside the
// same document cut to what the limits let through (1 alias), both over
// 30 actions of 6 versions each.
func BenchmarkRefusedAttack(b *testing.B) {
	s := storetest.Open(b, store.SQLite, nil)
	ctx := context.Background()
	env := graph.Env{Store: s, Work: s.NewWork("000000000000"), Access: graph.RootAccess()}
	for i := range 30 {
		vars := map[string]any{"id": id(800 + i), "input": starlarkInput(fmt.Sprint("bench", i))}
		if r := graph.Execute(ctx, env, graph.Request{Query: createWithVariables, Variables: vars}); len(r.Errors) > 0 {
			b.Fatal(r.Errors)
		}
		for v := range 5 {
			vars := map[string]any{"id": id(800 + i), "input": map[string]any{"description": fmt.Sprint("v", v)}}
			if r := graph.Execute(ctx, env, graph.Request{Query: updateWithVariables, Variables: vars}); len(r.Errors) > 0 {
				b.Fatal(r.Errors)
			}
		}
	}
	for _, c := range []struct {
		name    string
		n       int
		refused bool
	}{{"refused-2000", 2000, true}, {"allowed-1", 1, false}} {
		b.Run(c.name, func(b *testing.B) {
			query := graph.Request{Query: attack(c.n)}
			b.ReportAllocs()
			for b.Loop() {
				if r := graph.Execute(ctx, env, query); (len(r.Errors) > 0) != c.refused {
					b.Fatalf("%d errors: %v", len(r.Errors), r.Errors)
				}
			}
		})
	}
}
