package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
)

// Limits of one operation. A document is measured before it is validated
// or run, so that one built to be expensive (thousands of aliased lists of
// 500 with their histories) is refused for the price of parsing it:
//
//   - depth: fields nested in fields, fragments expanded;
//   - aliases: fields whose response name is not their own name;
//   - complexity: every field counts 1, times the page it asks for when it
//     is a paged list (first or last, default 50), so a list of 500 of a
//     selection of 10 fields is 5,000;
//
// and while it runs, the fields it resolves (one with a resolver of its
// own, which reads the database, counts resolverWeight), which bound what
// the estimate cannot see: a list without pages, such as calls, is as long
// as the data.
const (
	MaxDepth      = 20
	MaxAliases    = 256
	MaxComplexity = 100_000
	MaxFields     = 200_000
)

// CodeQueryLimit is an operation past one of the limits; the message
// names which (depth, aliases, complexity or fields) and its value.
const CodeQueryLimit = "QUERY_LIMIT_EXCEEDED"

func limitError(message, hint string) *Error {
	e := newError(CodeQueryLimit, "", message, nil)
	e.Hint = hint
	return e
}

// parsed keeps the documents measured, so that a document sent again is
// not parsed again here.
var parsed = lru.New[*ast.QueryDocument](queryCacheSize)

// checkLimits measures req's document; a document that does not parse is
// left to the executor, which reports it.
func checkLimits(ctx context.Context, req Request) error {
	doc, ok := parsed.Get(ctx, req.Query)
	if !ok {
		var err error
		doc, err = parser.ParseQueryWithTokenLimit(&ast.Source{Input: req.Query}, parserTokenLimit)
		if err != nil {
			return nil
		}
		parsed.Add(ctx, req.Query, doc)
	}
	m := &measure{schema: schema(), doc: doc, variables: req.Variables, fragments: map[fragmentKey]*cost{}}
	for _, op := range doc.Operations {
		if req.OperationName != "" && op.Name != req.OperationName {
			continue
		}
		root := m.schema.Query
		if op.Operation == ast.Mutation {
			root = m.schema.Mutation
		}
		c := m.selections(op.SelectionSet, root)
		switch {
		case c.depth > MaxDepth:
			return limitError(fmt.Sprintf("the operation nests fields %d deep; at most %d are allowed", c.depth, MaxDepth),
				"Ask for fewer nested levels, and read deeper parts with a query of their own (execution(id:) of a call, for example).")
		case c.aliases > MaxAliases:
			return limitError(fmt.Sprintf("the operation has %d aliased fields; at most %d are allowed", c.aliases, MaxAliases),
				"Ask for each thing once, or split the aliases across several operations.")
		case c.complexity > MaxComplexity:
			return limitError(fmt.Sprintf("the operation would resolve about %d fields (every field 1, times first or last on a paged list, 50 when not given); at most %d are allowed", c.complexity, MaxComplexity),
				"Ask for smaller pages (first:), fewer fields or fewer aliased lists, and page on with after:.")
		}
	}
	return nil
}

// cost is what a selection set measures.
type cost struct {
	depth, aliases, complexity int
	done                       bool
}

type fragmentKey struct{ name, on string }

type measure struct {
	schema    *ast.Schema
	doc       *ast.QueryDocument
	variables map[string]any
	fragments map[fragmentKey]*cost
}

// selections measures a selection set on parent (nil when unknown:
// fields of an unknown type count 1 each, nested as written).
func (m *measure) selections(set ast.SelectionSet, parent *ast.Definition) cost {
	var total cost
	add := func(c cost) {
		total.depth = max(total.depth, c.depth)
		total.aliases = saturate(total.aliases, c.aliases, 0)
		total.complexity = saturate(total.complexity, c.complexity, 0)
	}
	for _, selection := range set {
		switch s := selection.(type) {
		case *ast.Field:
			add(m.field(s, parent))
		case *ast.InlineFragment:
			on := parent
			if s.TypeCondition != "" {
				on = m.schema.Types[s.TypeCondition]
			}
			add(m.selections(s.SelectionSet, on))
		case *ast.FragmentSpread:
			add(m.spread(s))
		}
	}
	return total
}

func (m *measure) field(f *ast.Field, parent *ast.Definition) cost {
	var def *ast.FieldDefinition
	if parent != nil {
		def = parent.Fields.ForName(f.Name)
	}
	var child *ast.Definition
	if def != nil && def.Type != nil {
		child = m.schema.Types[def.Type.Name()]
	}
	inner := m.selections(f.SelectionSet, child)
	c := cost{depth: inner.depth + 1, aliases: inner.aliases}
	if f.Alias != "" && f.Alias != f.Name {
		c.aliases = saturate(c.aliases, 1, 0)
	}
	c.complexity = saturate(1, inner.complexity, m.page(f, parent, def))
	return c
}

// page is what a field multiplies its selection by: the page a paged list
// asks for, and 1 for anything else.
func (m *measure) page(f *ast.Field, parent *ast.Definition, def *ast.FieldDefinition) int {
	if def == nil {
		return 1
	}
	if def.Arguments.ForName("first") == nil && def.Arguments.ForName("last") == nil {
		if n, ok := unpaged[parent.Name+"."+def.Name]; ok {
			return n
		}
		return 1
	}
	n, given := 0, false
	for _, name := range []string{"first", "last"} {
		if v, ok := m.intArgument(f, name); ok {
			n, given = max(n, v), true
		}
	}
	if !given {
		return defaultPage
	}
	return min(max(n, 0), maxPage)
}

func (m *measure) intArgument(f *ast.Field, name string) (int, bool) {
	arg := f.Arguments.ForName(name)
	if arg == nil || arg.Value == nil {
		return 0, false
	}
	raw := arg.Value.Raw
	if arg.Value.Kind == ast.Variable {
		switch v := m.variables[raw].(type) {
		case json.Number:
			raw = v.String()
		case float64:
			raw = strconv.FormatFloat(v, 'f', -1, 64)
		case int:
			raw = strconv.Itoa(v)
		case int64:
			raw = strconv.FormatInt(v, 10)
		default:
			return 0, false
		}
	} else if arg.Value.Kind != ast.IntValue {
		return 0, false
	}
	n, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(n) {
		return 0, false
	}
	return int(min(max(n, 0), maxPage)), true
}

// spread measures a named fragment once per type it is spread on; one
// that spreads itself (which validation refuses) counts nothing more.
func (m *measure) spread(s *ast.FragmentSpread) cost {
	fragment := m.doc.Fragments.ForName(s.Name)
	if fragment == nil {
		return cost{}
	}
	key := fragmentKey{name: s.Name, on: fragment.TypeCondition}
	if c, ok := m.fragments[key]; ok {
		if !c.done {
			return cost{}
		}
		return *c
	}
	m.fragments[key] = &cost{}
	c := m.selections(fragment.SelectionSet, m.schema.Types[fragment.TypeCondition])
	c.done = true
	m.fragments[key] = &c
	return c
}

// saturate is a + b*times (times 0 meaning 1), kept well below overflow.
func saturate(a, b, times int) int {
	const ceiling = math.MaxInt32
	if times == 0 {
		times = 1
	}
	if b > 0 && times > ceiling/b {
		return ceiling
	}
	return min(a+b*times, ceiling)
}

// unpaged are the lists without pages that the estimate counts as a page
// of the default size: every version of an action, however many.
var unpaged = map[string]int{"Action.history": defaultPage}

// resolverWeight is what a field with a resolver or a method of its own
// counts against MaxFields: it reads the database, where a plain field
// reads a value already there.
const resolverWeight = 20

// fieldBudget counts the fields an operation resolves and refuses every
// one past MaxFields.
func fieldBudget(ctx context.Context, next graphql.Resolver) (any, error) {
	weight := int64(1)
	if fc := graphql.GetFieldContext(ctx); fc != nil && (fc.IsResolver || fc.IsMethod) {
		weight = resolverWeight
	}
	if st, ok := ctx.Value(requestKey{}).(*request); ok && st.fields.Add(weight) > MaxFields {
		return nil, limitError(fmt.Sprintf("the operation resolved more than %d fields, its limit", MaxFields),
			"Ask for smaller pages (first:), fewer fields, or lists such as history and calls of fewer executions at once.")
	}
	return next(ctx)
}
